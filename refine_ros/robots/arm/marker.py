"""A fiducial tracker on the door handle: a fixed camera that reports the handle marker's pose
while it can see the marker, and nothing while the arm is in the way.

Why: on a real arm the handle pose comes from a marker (an AprilTag) seen by a camera, and
the gripper covers the marker just when it grasps the handle, which is when the program
needs the handle most. The twin has to lose the marker at the same moments, so the whole
pipeline (bridge freshness, watchdog, program) meets that on the twin first.

Line of sight: the marker is modelled as a square tag `tag_size_m` wide centred on the
handle, facing the camera; it is seen when its centre lies within the camera's field of
view and range and the straight lines from the camera to the tag's centre and four corners
reach the handle before any other geometry (MuJoCo ray casts against every geom of the
scene: arm links, gripper fingers, table). A tag partly covered is lost, as fiducial
detectors lose a tag whose border is broken. The tag facing the camera is a proxy for a tag
glued on the handle's face: it ignores viewing-angle limits.

Frames: the marker frame is the handle's frame in Meta-World (the `handle` geom's pose, the
handle position and orientation of the door task's observation); a real tag sits on the
handle's surface, and a static transform from tag to handle centre maps one to the other.
The camera frame is an optical frame (z along the optical axis, x right, y down in the
picture) placed at `position` in the robot's base frame and looking at `look_at`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refine_ros.robots._twin.frames import Pose
from refine_ros.robots._twin.realtime import Noise


@dataclass(frozen=True)
class MarkerCamera:
    """A fixed camera in the robot's base frame (metres, radians). The default sits to the
    robot's right of the door, level with the handle's upper part, where it sees the handle
    through the whole task except around the grasp."""

    position: tuple[float, float, float] = (0.9, 0.5, 0.45)
    look_at: tuple[float, float, float] = (0.1, 0.7, 0.15)
    horizontal_fov_rad: float = 1.2
    vertical_fov_rad: float = 0.9
    max_range_m: float = 2.0
    tag_size_m: float = 0.04

    def pose(self) -> Pose:
        """The optical frame in the base frame."""
        z = np.asarray(self.look_at, dtype=float) - np.asarray(self.position, dtype=float)
        z /= np.linalg.norm(z)
        x = np.cross(z, [0.0, 0.0, 1.0])  # image right: horizontal, so the picture is level
        if np.linalg.norm(x) < 1e-9:
            raise ValueError("the camera cannot look straight up or down")
        x /= np.linalg.norm(x)
        y = np.cross(z, x)  # image down
        return Pose.of(self.position, np.stack([x, y, z], axis=1))


@dataclass(frozen=True)
class MarkerSighting:
    """One look at the marker. `visible` False: the tracker reports no detection, and
    `reason` says why ("occluded by <body>", "out of view", "out of range"). Poses are the
    noisy measured ones: the marker in the camera's optical frame and in the base frame."""

    visible: bool
    reason: str = ""
    occluder: str | None = None
    in_camera: Pose | None = None
    in_base: Pose | None = None


class MarkerTracker:
    """Line-of-sight tests and measurement noise for one marker body in a MuJoCo scene."""

    def __init__(
        self,
        model,
        data,
        camera: MarkerCamera = MarkerCamera(),
        marker_geom: str = "handle",
        position_std_m: float = 0.002,
        rotation_std_rad: float = 0.01,
        noise: Noise | None = None,
    ) -> None:
        import mujoco

        self._mujoco = mujoco
        self.model, self.data = model, data
        self.camera = camera
        self.camera_pose = camera.pose()
        self.geom = model.geom(marker_geom).id
        self.body = int(model.geom_bodyid[self.geom])
        self.position_std_m = position_std_m
        self.rotation_std_rad = rotation_std_rad
        self.noise = noise or Noise(0)
        self._hit = np.zeros(1, dtype=np.int32)

    def true_pose(self) -> Pose:
        """The marker (handle) pose in the base frame, exact."""
        return Pose.of(self.data.geom_xpos[self.geom], self.data.geom_xmat[self.geom].reshape(3, 3))

    def tag_points(self) -> np.ndarray:
        """The tag's centre and corners (5, 3), the tag square facing the camera."""
        centre = np.asarray(self.data.geom_xpos[self.geom], dtype=float)
        view = centre - np.asarray(self.camera.position)
        view /= np.linalg.norm(view)
        across = np.cross(view, [0.0, 0.0, 1.0])
        across /= np.linalg.norm(across)
        up = np.cross(across, view)
        h = self.camera.tag_size_m / 2.0
        corners = [centre + h * (a * across + b * up) for a in (-1, 1) for b in (-1, 1)]
        return np.array([centre, *corners])

    def blocker(self, point: np.ndarray) -> str | None:
        """Name of the body that hides `point` from the camera, or None when the ray reaches
        the marker's own body (or nothing) first."""
        start = np.asarray(self.camera.position, dtype=float)
        ray = point - start
        dist = float(np.linalg.norm(ray))
        hit = self._mujoco.mj_ray(self.model, self.data, start, ray / dist, None, 1, -1, self._hit)
        geom = int(self._hit[0])
        if geom < 0 or hit < 0 or hit >= dist - 1e-4:
            return None
        body = int(self.model.geom_bodyid[geom])
        return None if body == self.body else self.model.body(body).name

    def look(self) -> MarkerSighting:
        truth = self.true_pose()
        in_camera = self.camera_pose.inverse() * truth
        x, y, z = in_camera.position
        if z <= 0 or abs(np.arctan2(x, z)) > self.camera.horizontal_fov_rad / 2 or \
                abs(np.arctan2(y, z)) > self.camera.vertical_fov_rad / 2:
            return MarkerSighting(False, "out of view")
        if np.linalg.norm(in_camera.position) > self.camera.max_range_m:
            return MarkerSighting(False, "out of range")
        for point in self.tag_points():
            body = self.blocker(point)
            if body is not None:
                return MarkerSighting(False, f"occluded by {body}", occluder=body)
        measured = self._measured(in_camera)
        return MarkerSighting(True, in_camera=measured, in_base=self.camera_pose * measured)

    def _measured(self, pose: Pose) -> Pose:
        """The pose with position noise (m) and a small random rotation (rad), per axis."""
        position = self.noise(pose.position, self.position_std_m)
        angle = self.noise(np.zeros(3), self.rotation_std_rad)
        return Pose.of(position, _rotation(angle) @ pose.rotation())


def _rotation(v: np.ndarray) -> np.ndarray:
    """Rotation matrix of the rotation vector `v` (Rodrigues)."""
    theta = float(np.linalg.norm(v))
    if theta < 1e-12:
        return np.eye(3)
    k = np.asarray(v) / theta
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + np.sin(theta) * kx + (1 - np.cos(theta)) * kx @ kx
