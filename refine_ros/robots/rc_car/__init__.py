"""An F1TENTH-style RC car that races the track (task car_racing): ackermann_msgs or Twist
commands, odometry, wheel speeds or the VESC's ERPM, and a camera whose track detector gives
the task's tiles. Its units and mappings (`interface`), the detector (`vision`, node
`track_detector`), the bridge and twin nodes (`rc_car_bridge`, `car_twin`), the twin's Box2D
core and camera (`twin`, `camera`), the hardware stand-in (`fake_driver`), its benchmark
figures (`bench`) and its descriptor (`robot`)."""
