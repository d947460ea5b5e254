"""The static check refuses each pattern a policy never needs and escapes start from, before
any of the program runs, and accepts ordinary programs (including the MLP baseline)."""

from __future__ import annotations

from pathlib import Path

import pytest
from programs.specs import CAR, DOOR

from refine_core.policy import build_policy, check_program_source, mlp_program
from refine_core.policy.errors import ContractError, ForbiddenCodeError, ProgramSyntaxError

PROGRAMS = Path(__file__).parent / "programs"
DOOR_SRC = (PROGRAMS / "door_basic.py").read_text()

FORBIDDEN = {
    "import_os": "import os",
    "import_subprocess_as": "import subprocess as sp",
    "from_os": "from os import system",
    "import_ctypes": "import ctypes",
    "import_importlib": "import importlib",
    "cpp_extension_import": "import torch.utils.cpp_extension",
    "cpp_extension_from": "from torch.utils.cpp_extension import load_inline",
    "cpp_extension_attr": "x = torch.utils.cpp_extension",
    "torch_hub": "m = torch.hub.load('a/b', 'c')",
    "torch_load": "w = torch.load('weights.pt')",
    "torch_save": "torch.save({}, 'out.pt')",
    "from_torch_load": "from torch import load",
    "numpy_ctypeslib": "import numpy as np\nlib = np.ctypeslib.load_library('x', '.')",
    "numpy_ctypeslib_import": "import numpy.ctypeslib",
    "numpy_load": "import numpy as np\na = np.load('x.npy')",
    "numpy_save": "import numpy as np\nnp.save('x.npy', [1])",
    "numpy_fromfile": "import numpy as np\na = np.fromfile('x')",
    "torch_os": "torch.os.system('id')",
    "np_sys": "import numpy as np\nnp.sys.exit(1)",
    "nn_sys": "nn.modules.module.sys",
    "torch_ops_load_library": "torch.ops.load_library('x.so')",
    "torch_compile": "f = torch.compile(lambda x: x)",
    "torch_private": "c = torch._C",
    "subclasses": "s = ().__class__.__bases__[0].__subclasses__()",
    "globals_attr": "g = nn.Module.forward.__globals__",
    "builtins_name": "b = __builtins__",
    "dict_attr": "d = nn.__dict__",
    "class_attr": "k = (1).__class__",
    "frame_walk": "f = (x for x in []).gi_frame.f_back",
    "eval": "eval('1 + 1')",
    "exec": "exec('x = 1')",
    "compile_name": "c = compile('1', 'x', 'eval')",
    "dunder_import": "m = __import__('os')",
    "open": "open('/etc/passwd').read()",
    "globals_call": "g = globals()",
    "locals_call": "l = locals()",
    "vars_call": "v = vars(torch)",
    "breakpoint": "breakpoint()",
    "input": "s = input()",
    "getattr_computed": "name = 'o' + 's'\nm = getattr(torch, name)",
    "setattr_computed": "setattr(torch, 'x' + 'y', 1)",
    "delattr_computed": "n = 'a'\ndelattr(torch, n)",
    "getattr_dunder_constant": "g = getattr(nn.Module, '__subclasses__')",
    "getattr_forbidden_constant": "o = getattr(torch, 'os')",
    "dunder_string": "k = '__globals__'",
    "relative_import": "from . import sibling",
    "star_import": "from torch import *",
    "import_pickle": "import pickle",
    "import_torch_utils_data": "import torch.utils.data",
    "getattr_alias": "g = getattr\nm = g(torch, 'o' + 's')",
    "format_string_dunder": "s = '{0.__globals__}'.format(nn.Module.forward)",
    "torch_from_file": "t = torch.from_file('/etc/passwd', size=10)",
    "deep_private": "x = torch.nn.modules._functions",
    "torch_library": "lib = torch.library.Library('x', 'DEF')",
    "help": "help(torch)",
    "eval_rebound": "eval = eval\neval('1')",
    "input_default_from_outer": "def f(x=input()):\n    return x",
    "input_in_other_function": "def f(input):\n    return input\n\ndef g():\n    return input()",
    "input_global_in_nested": "def f(input):\n    def g():\n        global input\n        return input()\n    return g",
}


@pytest.mark.parametrize("snippet", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_each_forbidden_pattern_is_refused_with_its_line(snippet):
    source = DOOR_SRC + "\n\n" + snippet + "\n"
    first_line = len((DOOR_SRC + "\n\n").splitlines()) + 1
    with pytest.raises(ForbiddenCodeError) as info:
        check_program_source(source)
    error = info.value
    assert isinstance(error, ContractError) and error.rule == "forbidden_code"
    assert error.lineno is not None and error.lineno >= first_line
    assert f"line {error.lineno}" in str(error) and error.reason


def test_forbidden_code_inside_a_method_is_found():
    source = DOOR_SRC.replace(
        "        features = torch.nan_to_num(features)",
        "        features = torch.nan_to_num(features)\n        import os",
    )
    with pytest.raises(ForbiddenCodeError, match="'os'"):
        check_program_source(source)


def test_refused_program_never_runs(tmp_path):
    marker = tmp_path / "ran.txt"
    source = f"import torch\nopen({str(marker)!r}, 'w').write('x')\n" + DOOR_SRC
    with pytest.raises(ForbiddenCodeError):
        build_policy(source, DOOR)
    assert not marker.exists()


def test_syntax_errors_are_reported_as_such():
    with pytest.raises(ProgramSyntaxError) as info:
        check_program_source("import torch\ndef f(:\n    pass\n")
    assert info.value.lineno == 2


@pytest.mark.parametrize(
    "source",
    [
        DOOR_SRC,
        (PROGRAMS / "car_basic.py").read_text(),
        mlp_program(CAR),
        mlp_program(DOOR),
        "from __future__ import annotations\n"
        "import math\nfrom typing import Optional\nimport numpy as np\n"
        "import torch\nimport torch.nn.functional as F\nfrom torch import nn\n"
        "from torch.distributions import Normal, MultivariateNormal\n"
        "from torch.nn import functional\n\n"
        "class P(nn.Module):\n"
        "    def __init__(self, k: Optional[float] = None):\n"
        "        super(P, self).__init__()\n"
        "        nn.Module.__init__(self)\n"
        "        self._scale = nn.Parameter(torch.tensor([math.pi]))\n"
        "        self.table = np.linspace(0.0, 1.0, 5)\n"
        "    def forward(self, x):\n"
        "        y = getattr(self, '_scale') * F.relu(x) + torch.linalg.norm(x)\n"
        "        return y\n\n"
        "if __name__ == '__main__':\n    pass\n",
        "import torch\nfrom torch import nn\n\n"
        "class P(nn.Module):\n"
        "    def forward(self, input):\n"
        "        scale = lambda v: v * 2.0\n"
        "        return scale(input) + torch.relu(input)\n",
    ],
    ids=["door", "car", "mlp_car", "mlp_door", "typical_imports", "argument_named_input"],
)
def test_ordinary_programs_pass(source):
    check_program_source(source)
