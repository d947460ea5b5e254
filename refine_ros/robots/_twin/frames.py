"""Poses, transforms and joint states as ROS carries them: translation in metres and a
quaternion in ROS's order (x, y, z, w). MuJoCo stores quaternions (w, x, y, z); the helpers
convert at the edge so nothing downstream has to remember which order a number came in."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def xyzw_from_wxyz(q) -> tuple[float, float, float, float]:
    w, x, y, z = (float(v) for v in q)
    return (x, y, z, w)


def matrix_from_xyzw(q) -> np.ndarray:
    x, y, z, w = (float(v) for v in q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # fmt: skip


def xyzw_from_matrix(m: np.ndarray) -> tuple[float, float, float, float]:
    """The unit quaternion (x, y, z, w) of a rotation matrix, w >= 0."""
    m = np.asarray(m, dtype=float)
    t = np.trace(m)
    if t > 0:
        s = 2.0 * np.sqrt(1.0 + t)
        q = ((m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s, s / 4.0)
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        v = np.zeros(3)
        v[i] = s / 4.0
        v[j] = (m[j, i] + m[i, j]) / s
        v[k] = (m[k, i] + m[i, k]) / s
        q = (*v, (m[k, j] - m[j, k]) / s)
    q = np.asarray(q) / np.linalg.norm(q)
    return tuple(float(v) for v in (q if q[3] >= 0 else -q))


def _qmul(a, b) -> tuple[float, float, float, float]:
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)  # fmt: skip


def _rotate(q, v) -> tuple[float, float, float]:
    x, y, z, _ = _qmul(_qmul(q, (float(v[0]), float(v[1]), float(v[2]), 0.0)), (-q[0], -q[1], -q[2], q[3]))
    return (x, y, z)


@dataclass(frozen=True)
class Pose:
    """A frame's pose in a parent frame: position (m) and orientation (x, y, z, w).

    Plain float arithmetic (no matrices): a twin composes a dozen of these every tick."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)

    @classmethod
    def of(cls, position, rotation: np.ndarray) -> Pose:
        """From a position and a rotation matrix."""
        return cls(tuple(float(v) for v in position), xyzw_from_matrix(rotation))

    @classmethod
    def of_wxyz(cls, position, quaternion_wxyz) -> Pose:
        """From a position and a MuJoCo-order quaternion (w, x, y, z)."""
        return cls(tuple(float(v) for v in position), xyzw_from_wxyz(quaternion_wxyz))

    def rotation(self) -> np.ndarray:
        return matrix_from_xyzw(self.orientation)

    def inverse(self) -> Pose:
        x, y, z, w = self.orientation
        conj = (-x, -y, -z, w)
        px, py, pz = _rotate(conj, self.position)
        return Pose((-px, -py, -pz), conj)

    def __mul__(self, other: Pose) -> Pose:
        """Composition: `a * b` is b's pose expressed in a's parent frame."""
        rx, ry, rz = _rotate(self.orientation, other.position)
        x, y, z = self.position
        return Pose((x + rx, y + ry, z + rz), _qmul(self.orientation, other.orientation))


@dataclass(frozen=True)
class Transform:
    """One edge of a TF tree (`geometry_msgs/TransformStamped` without the stamp)."""

    parent: str
    child: str
    pose: Pose


@dataclass(frozen=True)
class JointStates:
    """`sensor_msgs/JointState`: per named joint, position (rad or m) and velocity (rad/s or
    m/s)."""

    stamp: float
    name: tuple[str, ...]
    position: tuple[float, ...]
    velocity: tuple[float, ...]
