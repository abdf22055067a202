"""Runtime: generated-code support, the on-disk cache, and turning failed checks into errors."""
