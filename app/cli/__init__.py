"""The `toolgate` command, one module per verb group."""
