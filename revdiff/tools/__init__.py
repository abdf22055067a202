"""Tools on top of the library: ``revdiff compare``, ``revdiff bench``, reference gradients, peers' gradients, the command line."""
