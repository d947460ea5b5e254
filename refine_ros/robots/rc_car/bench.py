"""The car twin's figures for `refine bench`: how well the track detector reads the rendered
camera, and what one real-time step of the twin costs against its control period.

Each function returns a plain dict (JSON-ready); nothing here starts ROS.
`python -m refine_ros.robots.rc_car.bench [detector|car]` prints them.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
from tqdm.auto import tqdm

from refine_ros.robots._twin.costs import cost_figures, tick_costs
from refine_ros.robots.rc_car.camera import ROAD_WIDTH_M, CarCamera, PinholeCamera


def _stats(values) -> dict[str, float]:
    v = np.asarray(values, dtype=float).ravel()
    if v.size == 0:
        return {"mean": float("nan"), "p95": float("nan")}
    return {"mean": float(v.mean()), "p95": float(np.percentile(v, 95))}


def tile_errors(detected: np.ndarray, simulated: np.ndarray) -> np.ndarray:
    """Absolute per-tile errors (frames, 12, 4): |dx|, |dy|, |dtheta| wrapped to [0, pi],
    and 1 where the border flags disagree."""
    from refine_core.tasks.car_racing.env import wrap_angle

    d, s = np.asarray(detected, dtype=float), np.asarray(simulated, dtype=float)
    err = np.abs(d - s)
    err[..., 2] = np.abs(wrap_angle(d[..., 2] - s[..., 2]))
    err[..., 3] = (d[..., 3] != s[..., 3]).astype(float)
    return err


def detector_tile_error(
    seeds: Sequence[int] = (0,),
    every: int = 2,
    max_steps: int = 1500,
    camera: PinholeCamera | None = None,
    road_width_m: float = ROAD_WIDTH_M,
    pixel_noise: float = 2.0,
    progress: bool | None = None,
    detector_camera: PinholeCamera | None = None,
) -> dict:
    """Drive the scripted expert around each seed's track (until the lap closes or
    `max_steps`), render the car's camera every `every` steps, run the track detector on the
    picture and compare its tiles with the simulator's own.

    Returns per feature the mean and 95th percentile of the absolute error over every tile
    of every frame with tiles (`x`, `y`, `theta`, in track units and radians), the per-tile
    means (`per_tile`, tile 0 first), `border_agreement` (fraction of tiles whose kerb flag
    matches), `not_found_fraction` (frames where the detector found no road), the
    simulator's own mean |x| for scale, and the render and detection times (ms). `camera`
    defaults to `PinholeCamera()` (the detector's default calibration); `detector_camera` is
    what the detector believes the camera is (default: exactly `camera`, a perfect
    calibration)."""
    from refine_core.tasks.car_racing.env import CarRacingSemantic
    from refine_core.tasks.car_racing.expert import CarExpert
    from refine_ros.robots.rc_car.vision import TrackNotFound, detect_tiles

    camera = camera or PinholeCamera()
    model = (detector_camera or camera).detector_model(road_width_m)
    simulated, detected, render_ms, detect_ms = [], [], [], []
    frames = missed = laps = 0
    bar = tqdm(total=len(seeds) * max_steps, desc="detector lap", unit="step", disable=None if progress is None
               else not progress)  # fmt: skip
    for seed in seeds:
        env = CarRacingSemantic()
        obs, _ = env.reset(seed=int(seed))
        expert = CarExpert(env)
        cam = CarCamera(env, camera, road_width_m, pixel_noise=pixel_noise, rng=np.random.default_rng(seed))
        for step in range(max_steps):
            obs, _, terminated, _, info = env.step(expert(obs))
            bar.update()
            if step % every == 0:
                frames += 1
                t0 = time.perf_counter()
                image = cam.render()
                t1 = time.perf_counter()
                try:
                    tiles = detect_tiles(image, model)
                except TrackNotFound:
                    missed += 1
                    tiles = None
                t2 = time.perf_counter()
                render_ms.append((t1 - t0) * 1e3)
                detect_ms.append((t2 - t1) * 1e3)
                if tiles is not None:
                    simulated.append(np.asarray(obs["tiles"], dtype=float))
                    detected.append(tiles)
            if terminated:
                laps += int(bool(info.get("lap_finished")))
                break
        env.close()
    bar.close()
    err = tile_errors(np.array(detected).reshape(-1, 12, 4), np.array(simulated).reshape(-1, 12, 4))
    sim = np.array(simulated).reshape(-1, 12, 4)
    out: dict = {name: _stats(err[..., k]) for k, name in enumerate(("x", "y", "theta"))}
    out["per_tile"] = {name: [float(v) for v in err[..., k].mean(axis=0)] if len(err) else []
                       for k, name in enumerate(("x", "y", "theta"))}  # fmt: skip
    out.update(
        border_agreement=float(1.0 - err[..., 3].mean()) if len(err) else float("nan"),
        not_found_fraction=missed / frames if frames else float("nan"),
        frames=frames,
        laps_closed=laps,
        seeds=[int(s) for s in seeds],
        simulator_mean_abs_x=float(np.abs(sim[..., 0]).mean()) if len(sim) else float("nan"),
        render_ms=_stats(render_ms),
        detect_ms=_stats(detect_ms),
        camera=asdict(camera),
        road_width_m=road_width_m,
        pixel_noise=pixel_noise,
    )
    return out


def car_step_cost(seconds: float = 20.0, rate_hz: float = 50.0, progress: bool | None = None) -> dict:
    """What one real-time tick of the car twin costs (simulator steps due, odometry, wheels,
    ERPM, and a rendered camera frame at 25 Hz) against the control period, driving the
    track with the scripted expert's steering (its steer action is minus the wheel angle)
    at 1.5 m/s. Figures for all ticks and for the ticks that rendered a frame."""
    from refine_core.tasks.car_racing.expert import CarExpert
    from refine_ros.robots.rc_car.twin import CarTwin, CarTwinConfig, DriveCommand

    twin = CarTwin(CarTwinConfig(rate_hz=rate_hz))
    expert = CarExpert(twin.env)
    framed: list[bool] = []

    def command(t: float) -> None:
        twin.drive(DriveCommand(speed=1.5, steering_angle=-float(expert(None)[0])), t)

    def tick(t: float) -> None:
        framed.append(twin.tick(t).camera is not None)

    period = 1.0 / rate_hz
    costs = tick_costs(command, tick, int(seconds * rate_hz), period, progress, "car twin")
    out = cost_figures(costs, period)
    out["camera_ticks"] = cost_figures(costs[np.array(framed)], period)
    out["status"] = {k: v for k, v in twin.status().items() if k != "dropped"}
    twin.close()
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["detector", "car"], nargs="?", default="detector")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="detector: tracks to drive")
    parser.add_argument("--every", type=int, default=2, help="detector: a frame every N steps")
    parser.add_argument("--pixel-noise", type=float, default=2.0, help="detector: camera noise (0-255)")
    parser.add_argument("--seconds", type=float, default=20.0, help="car: simulated seconds")
    parser.add_argument("--rate", type=float, default=50.0, help="car: control rate (Hz)")
    args = parser.parse_args(argv)
    if args.what == "detector":
        result = detector_tile_error(args.seeds, args.every, pixel_noise=args.pixel_noise)
    else:
        result = car_step_cost(args.seconds, args.rate)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
