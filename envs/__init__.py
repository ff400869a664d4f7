"""Environments built on gpu_vecenv."""
