"""The capture stage: ``torch.export`` of the model with patch rules and control-flow conversion
installed (:mod:`fxport.capture.stage`), dynamic dimensions (:mod:`~fxport.capture.dynamic_dims`),
failures classified as data (:mod:`~fxport.capture.failures`), the guards that pin or narrow a
dimension (:mod:`~fxport.capture.size_one_stop`, :mod:`~fxport.capture.hinted_guards`) and the
bodies of loops whose state grows (:mod:`~fxport.capture.loop_bodies`).

A stage package imports nothing from a later stage's package (``tests/test_architecture.py``).
"""
