"""Forward kinematics of a URDF, so tests can check that what RViz draws from `joint_states`
is where the simulator has each body."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np


def urdf_forward_kinematics(path, positions: dict[str, float]) -> dict[str, np.ndarray]:
    """World pose (4x4) of every link of a URDF for the given joint positions."""
    from scipy.spatial.transform import Rotation

    root = ET.parse(path).getroot()
    joints = {}
    for j in root.findall("joint"):
        o = j.find("origin")
        xyz = np.array([float(v) for v in (o.get("xyz", "0 0 0") if o is not None else "0 0 0").split()])
        rpy = [float(v) for v in (o.get("rpy", "0 0 0") if o is not None else "0 0 0").split()]
        axis = j.find("axis")
        joints[j.find("child").get("link")] = (
            j.get("name"), j.get("type"), j.find("parent").get("link"), xyz,
            Rotation.from_euler("xyz", rpy).as_matrix(),
            np.array([float(v) for v in axis.get("xyz").split()]) if axis is not None else np.zeros(3),
        )
    poses = {"world": np.eye(4)}

    def pose(link):
        if link not in poses:
            name, kind, parent, xyz, rot, axis = joints[link]
            local = np.eye(4)
            local[:3, :3], local[:3, 3] = rot, xyz
            motion = np.eye(4)
            q = positions.get(name, 0.0)
            if kind in ("revolute", "continuous"):
                motion[:3, :3] = Rotation.from_rotvec(axis * q).as_matrix()
            elif kind == "prismatic":
                motion[:3, 3] = axis * q
            poses[link] = pose(parent) @ local @ motion
        return poses[link]

    for link in joints:
        pose(link)
    return poses
