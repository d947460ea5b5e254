"""A small TF buffer: the newest transform of every frame from `/tf` and `/tf_static`
(tf2_msgs/TFMessage), and the pose of one frame in another through the tree. No ROS import.

Why our own: tf2_ros has no wheel here, and the bridge needs only the newest pose of a few
frames, never interpolation in time. Where tf2_ros is installed it gives the same answers; this
keeps the bridge free of it. A lookup says how old its answer is: the stamp of the oldest
dynamic transform on the path (static transforms are timeless), so a caller judges freshness by
when the driver measured the pose, not by when the message happened to arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def quaternion_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product of quaternions in (x, y, z, w) order."""
    ax, ay, az, aw = a
    bx, by, bz, bw = b
    return np.array([
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ])


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vector `v` rotated by unit quaternion `q` (x, y, z, w): v + w t + u x t, t = 2 u x v.

    The cross products are written out on floats: `np.cross` on 3-vectors cost some 30 us a
    call here, and a lookup composes the arm's whole chain (two crosses per link), so it was the
    bridge's largest cost (profiled on the arm twin: a third of its main thread)."""
    ux, uy, uz, w = float(q[0]), float(q[1]), float(q[2]), float(q[3])
    vx, vy, vz = float(v[0]), float(v[1]), float(v[2])
    tx, ty, tz = 2.0 * (uy * vz - uz * vy), 2.0 * (uz * vx - ux * vz), 2.0 * (ux * vy - uy * vx)
    return np.array([vx + w * tx + uy * tz - uz * ty,
                     vy + w * ty + uz * tx - ux * tz,
                     vz + w * tz + ux * ty - uy * tx])


def conjugate(q: np.ndarray) -> np.ndarray:
    return np.array([-q[0], -q[1], -q[2], q[3]])


@dataclass(frozen=True)
class Transform:
    """The pose of `child` in `parent`: p_parent = rotation * p_child + translation."""

    translation: np.ndarray
    rotation: np.ndarray
    """Unit quaternion (x, y, z, w)."""

    def then(self, inner: Transform) -> Transform:
        """self o inner: first `inner` (child -> middle), then self (middle -> parent)."""
        return Transform(rotate(self.rotation, inner.translation) + self.translation,
                         quaternion_multiply(self.rotation, inner.rotation))

    def inverse(self) -> Transform:
        q = conjugate(self.rotation)
        return Transform(-rotate(q, self.translation), q)


IDENTITY = Transform(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]))


@dataclass(frozen=True)
class _Edge:
    parent: str
    transform: Transform
    stamp: float | None
    """Seconds; None for a static transform."""


@dataclass(frozen=True)
class Lookup:
    transform: Transform
    stamp: float | None
    """The oldest dynamic stamp on the path (None: every transform on it is static)."""


class TfBuffer:
    """The newest transform per child frame. Frames are named without a leading slash (tf2's
    rule; a leading slash is stripped)."""

    def __init__(self) -> None:
        self._edges: dict[str, _Edge] = {}

    @staticmethod
    def _name(frame: str) -> str:
        return frame.lstrip("/")

    def set_transform(self, parent: str, child: str, translation, rotation, stamp: float | None) -> bool:
        """Store one transform (stamp None: static). Refused (False) when it is not finite, its
        quaternion is not a rotation, or it would close a loop in the tree."""
        parent, child = self._name(parent), self._name(child)
        t, q = np.asarray(translation, dtype=float), np.asarray(rotation, dtype=float)
        if not parent or not child or parent == child or t.shape != (3,) or q.shape != (4,):
            return False
        if not (np.all(np.isfinite(t)) and np.all(np.isfinite(q))):
            return False
        norm = float(np.linalg.norm(q))
        if abs(norm - 1.0) > 1e-3:
            return False
        if child in self._ancestors(parent):
            return False
        self._edges[child] = _Edge(parent, Transform(t, q / norm), stamp)
        return True

    def _ancestors(self, frame: str) -> list[str]:
        """`frame` and its parents up to its root."""
        chain = [frame]
        while chain[-1] in self._edges and len(chain) <= len(self._edges) + 1:
            chain.append(self._edges[chain[-1]].parent)
        return chain

    def _to_ancestor(self, frame: str, ancestor: str) -> tuple[Transform, float | None]:
        """Pose of `frame` in `ancestor` and the oldest dynamic stamp on the way."""
        pose, oldest = IDENTITY, None
        while frame != ancestor:
            edge = self._edges[frame]
            pose = edge.transform.then(pose)
            if edge.stamp is not None:
                oldest = edge.stamp if oldest is None else min(oldest, edge.stamp)
            frame = edge.parent
        return pose, oldest

    def lookup(self, target: str, source: str) -> Lookup | None:
        """The pose of frame `source` in frame `target`; None when they are not connected."""
        target, source = self._name(target), self._name(source)
        up_source = self._ancestors(source)
        up_target = self._ancestors(target)
        common = next((f for f in up_source if f in set(up_target)), None)
        if common is None:
            return None
        source_in_common, s1 = self._to_ancestor(source, common)
        target_in_common, s2 = self._to_ancestor(target, common)
        stamps = [s for s in (s1, s2) if s is not None]
        return Lookup(target_in_common.inverse().then(source_in_common), min(stamps) if stamps else None)

    def frames(self) -> set[str]:
        return set(self._edges) | {e.parent for e in self._edges.values()}
