"""Front end: source text to IR (``parse``) and the static reversibility rules (``check``)."""
