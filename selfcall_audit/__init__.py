"""Find and remove agent self-calls in NeMo Gym-style codebases."""

__version__ = "0.1.0"
