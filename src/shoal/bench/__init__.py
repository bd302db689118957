"""What runs: the sweep driver over the native benchmark program."""
