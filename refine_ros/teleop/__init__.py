"""What an operator's hands become, apart from the nodes: the gamepad and keyboard maps of the
teleop nodes (`maps`), one demonstration take being recorded (`recording`) and the raw driver
topics of a take kept as MCAP (`take_bag`), both for the demo recorder. None imports rclpy."""
