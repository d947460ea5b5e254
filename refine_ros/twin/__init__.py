"""Physics twins of the real robots, without ROS: the simulators behind a robot's own
interfaces, in real time, with latency, sensor noise and dropouts.

A twin lets a team rehearse the real-robot workflow (teleop takes, refinement rounds, live
episodes through the safety node) before the hardware is on the bench. Everything here is
plain Python that a ROS node wraps thinly, so the physics, the units and the timing are tested
without DDS. Importing this package loads no simulator; each module loads only what it needs:

- `realtime`: fixed-rate stepping from an injected clock, command latency, seeded sensor
  noise, dropout windows (shared by both twins);
- `car_camera`: the image a camera on the Box2D car sees (pinhole, perspective ground);
- `car`: the Box2D car driven by F1TENTH-style commands (steering angle, speed), producing
  odometry, wheel speeds, motor ERPM and the camera image;
- `arm`: the MuJoCo door scene driven by a Cartesian twist and a gripper position command,
  producing joint states, TF-style transforms, the door angle;
- `marker`: a fiducial tracker on the door handle that loses the marker when occluded;
- `bench`: figures for `refine bench` (detector tile error on rendered images, stepping cost).
"""
