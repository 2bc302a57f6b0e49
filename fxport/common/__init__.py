"""Helpers every stage shares, one owner each: source locations (frames), provenance, shapes,
quiet torch output, atomic output files."""
