"""The eager stage: calling the user's model (its signature, input sets, an eager run, the
bounds on runs fxport starts itself) and the reference outputs later stages compare with."""
