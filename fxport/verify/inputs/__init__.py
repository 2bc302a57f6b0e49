"""Verification's input sets: the model's input domains read from the program
(:mod:`~fxport.verify.inputs.domains`), the sets generated in them
(:mod:`~fxport.verify.inputs.generated`) and the sizes those run at (:mod:`~fxport.verify.inputs.sizes`).
"""
