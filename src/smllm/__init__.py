"""smllm: state machines that guide coding agents one state at a time."""

__version__ = "0.1.0"
__all__ = ["__version__"]
