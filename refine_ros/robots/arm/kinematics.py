"""Arm kinematics from the robot's own URDF: the chain from a base link to a tip link, its
forward kinematics and Jacobian, and the joint velocities that move the tip at a Cartesian
velocity. No ROS import (numpy and the standard library's XML parser).

Why here: a ros2_control forward velocity controller takes *joint* velocities, while the door
task commands the tool's velocity in the base frame. The bridge reads the URDF the robot
already publishes (`robot_description`, from its robot_state_publisher), so no kinematics
package has to be installed and no model of ours can disagree with the robot's.

Damped least squares (qdot = J^T (J J^T + lambda^2 I)^-1 v) because near a singularity the
plain pseudo-inverse asks for unbounded joint speeds; the damping trades a small tracking
error for bounded ones. The tool's orientation is held (zero angular velocity is part of the
target). Joint speeds beyond the URDF's `<limit velocity>` scale the whole vector down, so the
tip's direction is kept.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

MOVABLE = ("revolute", "continuous", "prismatic")


class KinematicsError(ValueError):
    """A URDF without the asked-for chain, or malformed joint data."""


def rpy_matrix(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF's fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = (math.cos(roll), math.sin(roll), math.cos(pitch), math.sin(pitch),
                              math.cos(yaw), math.sin(yaw))
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    x, y, z = axis
    c, s, t = math.cos(angle), math.sin(angle), 1.0 - math.cos(angle)
    return np.array([
        [t * x * x + c, t * x * y - s * z, t * x * z + s * y],
        [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
        [t * x * z - s * y, t * y * z + s * x, t * z * z + c],
    ])


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str
    parent: str
    child: str
    origin: np.ndarray
    """4x4 transform of the joint frame in the parent link frame."""
    axis: np.ndarray
    velocity_limit: float | None


def _floats(text: str | None, default: str) -> list[float]:
    return [float(v) for v in (text or default).split()]


def _parse_joints(urdf: str) -> dict[str, Joint]:
    """child link -> the joint that carries it."""
    try:
        root = ET.fromstring(urdf)
    except ET.ParseError as exc:
        raise KinematicsError(f"robot_description is not valid XML: {exc}") from None
    joints: dict[str, Joint] = {}
    for j in root.iter("joint"):
        parent, child = j.find("parent"), j.find("child")
        if parent is None or child is None:
            continue
        origin = j.find("origin")
        xyz = _floats(origin.get("xyz") if origin is not None else None, "0 0 0")
        rpy = _floats(origin.get("rpy") if origin is not None else None, "0 0 0")
        frame = np.eye(4)
        frame[:3, :3], frame[:3, 3] = rpy_matrix(*rpy), xyz
        axis_el = j.find("axis")
        axis = np.array(_floats(axis_el.get("xyz") if axis_el is not None else None, "1 0 0"))
        norm = float(np.linalg.norm(axis))
        limit = j.find("limit")
        velocity = limit.get("velocity") if limit is not None else None
        joints[child.get("link")] = Joint(
            j.get("name"), j.get("type"), parent.get("link"), child.get("link"), frame,
            axis / norm if norm > 0 else axis, float(velocity) if velocity else None)
    return joints


class Chain:
    """The serial chain from `base` to `tip` of a URDF."""

    def __init__(self, urdf: str, base: str, tip: str) -> None:
        by_child = _parse_joints(urdf)
        path: list[Joint] = []
        link = tip
        while link != base:
            if link not in by_child:
                raise KinematicsError(f"no chain from {base!r} to {tip!r} in robot_description (stuck at {link!r})")
            path.append(by_child[link])
            link = by_child[link].parent
        self.base, self.tip = base, tip
        self.joints: tuple[Joint, ...] = tuple(reversed(path))
        self.movable: tuple[Joint, ...] = tuple(j for j in self.joints if j.kind in MOVABLE)

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.movable)

    def velocity_limits(self) -> np.ndarray:
        return np.array([j.velocity_limit if j.velocity_limit else np.inf for j in self.movable])

    def _frames(self, positions: Mapping[str, float]) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray, str]]]:
        """Tip pose in the base, and (origin, axis, kind) of every movable joint in the base."""
        pose = np.eye(4)
        axes = []
        for j in self.joints:
            pose = pose @ j.origin
            if j.kind in MOVABLE:
                axes.append((pose[:3, 3].copy(), pose[:3, :3] @ j.axis, j.kind))
                q = float(positions[j.name])
                motion = np.eye(4)
                if j.kind == "prismatic":
                    motion[:3, 3] = j.axis * q
                else:
                    motion[:3, :3] = axis_angle_matrix(j.axis, q)
                pose = pose @ motion
        return pose, axes

    def forward(self, positions: Mapping[str, float]) -> np.ndarray:
        """4x4 pose of the tip in the base."""
        return self._frames(positions)[0]

    def jacobian(self, positions: Mapping[str, float]) -> np.ndarray:
        """6 x n geometric Jacobian of the tip in the base frame (linear rows first)."""
        pose, axes = self._frames(positions)
        tip = pose[:3, 3]
        columns = []
        for origin, axis, kind in axes:
            if kind == "prismatic":
                columns.append(np.concatenate([axis, np.zeros(3)]))
            else:
                columns.append(np.concatenate([np.cross(axis, tip - origin), axis]))
        return np.array(columns).T if columns else np.zeros((6, 0))


def damped_least_squares(jacobian: np.ndarray, twist: np.ndarray, damping: float) -> np.ndarray:
    """Joint velocities that best give `twist` (6: linear then angular) with damping."""
    jj = jacobian @ jacobian.T + (damping ** 2) * np.eye(jacobian.shape[0])
    return jacobian.T @ np.linalg.solve(jj, twist)


def scale_to_limits(qdot: np.ndarray, limits: np.ndarray) -> np.ndarray:
    """`qdot` scaled down as a whole so that no joint exceeds its limit (direction kept)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(np.isfinite(limits) & (limits > 0), np.abs(qdot) / limits, 0.0)
    worst = float(np.max(ratio)) if ratio.size else 0.0
    return qdot / worst if worst > 1.0 else qdot


def joint_velocities(chain: Chain, positions: Mapping[str, float], linear: Sequence[float],
                     damping: float) -> np.ndarray:
    """The joint velocities (chain order) that move the tip at `linear` m/s in the base frame
    and keep its orientation, within the URDF's velocity limits."""
    target = np.concatenate([np.asarray(linear, dtype=float), np.zeros(3)])
    if not np.any(target):
        return np.zeros(len(chain.movable))
    qdot = damped_least_squares(chain.jacobian(positions), target, damping)
    return scale_to_limits(qdot, chain.velocity_limits())
