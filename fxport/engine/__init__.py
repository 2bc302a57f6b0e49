"""The engine: what a conversion is asked to do (options, choices), what flows between the
stages (conversion), the stage table (stages) and the runner (pipeline)."""
