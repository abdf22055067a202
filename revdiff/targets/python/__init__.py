"""The Python backend: low-level IR printed as Python source, run as it is (``backend="python"``)."""
