"""Continuous Tag (WarpDrive's "Tag continuous"), registered as ``WarpTag-v0``."""

from envs.tag_continuous.config import TagConfig

__all__ = ["TagConfig"]
