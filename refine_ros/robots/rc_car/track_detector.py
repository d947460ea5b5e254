"""Track detector node: camera images -> the simulator's tile features on `track/tiles`.

The vision is in `refine_ros.robots.rc_car.vision` (ROS-free, tested on drawn images). Images arrive best
effort (SENSOR QoS, like camera drivers publish them); the tiles go out best effort too,
because a late frame's tiles are worthless and the car bridge treats a gap as stale. When
the road is not found nothing is published: no invented tiles.
"""

from __future__ import annotations

import numpy as np
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from sensor_msgs.msg import Image
from std_msgs.msg import Float64MultiArray, MultiArrayDimension

from refine_ros.nodes._main import run_node
from refine_ros.params import Param, declare_parameters
from refine_ros.robots.rc_car.vision import (
    N_TILES,
    TILE_FEATURES,
    TILE_SPACING_UNITS,
    CameraModel,
    InvalidImage,
    Segmentation,
    TrackNotFound,
    detect_tiles,
)
from refine_ros.wire import qos

_HSV = (0, 255)
# name -> (default, description, range); the HSV thresholds are integers in 0 ... 255
PARAMETERS: dict[str, Param] = {
    "image_topic": Param("/camera/image_raw", "sensor_msgs/Image (bgr8, rgb8 or bgra8/rgba8)", read_only=False),
    "tiles_topic": Param("track/tiles", "Float64MultiArray (12 x 4) output", read_only=False),
    "camera_mode": Param("pinhole", "'pinhole' (intrinsics + mounting), 'top_down' or 'homography'", read_only=False),
    "fx": Param(500.0, "pinhole focal length x (px)", (1.0, 1e5), read_only=False),
    "fy": Param(500.0, "pinhole focal length y (px)", (1.0, 1e5), read_only=False),
    "cx": Param(320.0, "pinhole principal point x (px)", read_only=False),
    "cy": Param(240.0, "pinhole principal point y (px)", read_only=False),
    "camera_height": Param(0.15, "camera height above the ground (m)", (0.01, 10.0), read_only=False),
    "camera_pitch": Param(0.5, "camera pitch below the horizon (rad)", (0.0, 1.5707), read_only=False),
    "camera_forward_offset": Param(0.0, "camera position ahead of the car's reference point (m)", read_only=False),
    "metres_per_pixel": Param(0.005, "top_down: ground size of one pixel (m)", (1e-5, 1.0), read_only=False),
    "car_pixel": Param([320.0, 470.0], "top_down: pixel (u, v) of the car's reference point", read_only=False),
    "homography": Param([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0], "homography mode: row-major 3x3 pixel -> ground (forward, left) metres", read_only=False),
    "road_width": Param(0.3, "road width (m); it maps to 0.4 track units", (0.01, 20.0), read_only=False),
    "view_forward": Param(1.5, "ground distance ahead covered by the bird's-eye grid (m)", (0.05, 100.0), read_only=False),
    "view_half_width": Param(0.75, "ground half-width covered by the bird's-eye grid (m)", (0.05, 100.0), read_only=False),
    "grid_resolution": Param(0.005, "bird's-eye cell size (m)", (1e-4, 1.0), read_only=False),
    "tile_spacing": Param(TILE_SPACING_UNITS, "track units between tile centres (the simulator's)", (1e-3, 1.0), read_only=False),
    "road_saturation_max": Param(60, "road pixels: HSV saturation below this (0-255)", _HSV, read_only=False),
    "road_value_min": Param(50, "road pixels: HSV value above this (0-255)", _HSV, read_only=False),
    "road_value_max": Param(190, "road pixels: HSV value below this (0-255)", _HSV, read_only=False),
    "kerb_saturation_min": Param(120, "red kerb pixels: HSV saturation above this (0-255)", _HSV, read_only=False),
    "kerb_white_value_min": Param(215, "white kerb pixels: HSV value at least this (0-255)", _HSV, read_only=False),
}
_SEGMENTATION = ("road_saturation_max", "road_value_min", "road_value_max", "kerb_saturation_min",
                 "kerb_white_value_min")  # fmt: skip
_CAMERA = set(PARAMETERS) - {"image_topic", "tiles_topic", *_SEGMENTATION}


def image_to_bgr(msg: Image) -> np.ndarray:
    """sensor_msgs/Image -> HxWx3 uint8 BGR without cv_bridge; raises InvalidImage."""
    channels = {"bgr8": 3, "rgb8": 3, "bgra8": 4, "rgba8": 4}.get(msg.encoding)
    if channels is None:
        raise InvalidImage(f"unsupported encoding {msg.encoding!r}")
    if msg.step < msg.width * channels or len(msg.data) < msg.step * msg.height or msg.height == 0:
        raise InvalidImage("image data shorter than height * step")
    rows = np.frombuffer(bytes(msg.data), dtype=np.uint8)[: msg.step * msg.height]
    img = rows.reshape(msg.height, msg.step)[:, : msg.width * channels].reshape(msg.height, msg.width, channels)
    if msg.encoding.startswith("rgb"):
        img = img[..., [2, 1, 0]]
    return np.ascontiguousarray(img[..., :3])


def tiles_message(tiles: np.ndarray) -> Float64MultiArray:
    msg = Float64MultiArray()
    msg.layout.dim = [
        MultiArrayDimension(label="tiles", size=N_TILES, stride=N_TILES * TILE_FEATURES),
        MultiArrayDimension(label="x_y_theta_border", size=TILE_FEATURES, stride=TILE_FEATURES),
    ]
    msg.data = [float(v) for v in np.asarray(tiles).ravel()]
    return msg


class TrackDetector(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("track_detector", **kwargs)
        declare_parameters(self, PARAMETERS)
        self.camera = self._camera_from({})
        self.segmentation = Segmentation(**{n: int(self._param(n)) for n in _SEGMENTATION})
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self._pub = self.create_publisher(Float64MultiArray, self._param("tiles_topic"), qos.SENSOR)
        self.create_subscription(Image, self._param("image_topic"), self._on_image, qos.SENSOR)
        self.frames, self.detected, self.failures = 0, 0, 0

    def _param(self, name: str):
        return self.get_parameter(name).value

    def _camera_from(self, overrides: dict[str, object]) -> CameraModel:
        def v(name: str):
            return overrides[name] if name in overrides else self._param(name)

        common = dict(
            road_width_m=float(v("road_width")),
            view_forward_m=float(v("view_forward")),
            view_half_width_m=float(v("view_half_width")),
            tile_spacing_units=float(v("tile_spacing")),
        )
        mode = v("camera_mode")
        if mode == "pinhole":
            return CameraModel.pinhole(
                float(v("fx")), float(v("fy")), float(v("cx")), float(v("cy")),
                float(v("camera_height")), float(v("camera_pitch")),
                grid_m=float(v("grid_resolution")), forward_offset_m=float(v("camera_forward_offset")),
                **common,
            )  # fmt: skip
        if mode == "top_down":
            u, w = (float(x) for x in v("car_pixel"))
            return CameraModel.top_down(float(v("metres_per_pixel")), (u, w), **common)
        if mode == "homography":
            h = np.asarray(v("homography"), dtype=float)
            if h.size != 9:
                raise ValueError("homography needs 9 values")
            return CameraModel(h.reshape(3, 3), grid_m=float(v("grid_resolution")), **common)
        raise ValueError(f"camera_mode must be pinhole, top_down or homography, got {mode!r}")

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Camera and colour settings change as a whole or not at all."""
        changes = {p.name: p.value for p in params}
        if {"image_topic", "tiles_topic"} & set(changes):
            return SetParametersResult(successful=False, reason="topics are fixed at start")
        camera, segmentation = self.camera, self.segmentation
        try:
            if _CAMERA & set(changes):
                camera = self._camera_from(changes)
            if set(_SEGMENTATION) & set(changes):
                current = {n: int(changes.get(n, self._param(n))) for n in _SEGMENTATION}
                segmentation = Segmentation(**current)
        except (ValueError, TypeError, np.linalg.LinAlgError) as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        self.camera, self.segmentation = camera, segmentation
        return SetParametersResult(successful=True)

    def _on_image(self, msg: Image) -> None:
        self.frames += 1
        try:
            tiles = detect_tiles(image_to_bgr(msg), self.camera, self.segmentation)
        except (InvalidImage, TrackNotFound, ValueError) as exc:
            self.failures += 1
            self.get_logger().warning(f"no tiles: {exc}", throttle_duration_sec=1.0)
            return
        self.detected += 1
        self._pub.publish(tiles_message(tiles))


def main(args: list[str] | None = None) -> None:
    run_node(TrackDetector, args)


if __name__ == "__main__":
    main()
