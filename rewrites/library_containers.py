"""Library objects carried through converted control flow: transformers' caches.

Not a rule: the control-flow runtime carries a library's objects (a ``DynamicCache`` passed from
one decoding step to the next) through a converted ``if`` or a loop whose state grows as their
tensors once they are registered with its generic hook, and this module adds transformers'
registrations (:mod:`fxport.generation.caches`) to the hooks it runs before each conversion.
Built-in rule modules are imported when a conversion collects its rules, so they are in place
before the first capture; a library imported later is registered at the next conversion.
A library of your own registers its classes the same way:
``fxport.controlflow.operators.containers.register_container(cls, flatten, unflatten)``.
"""

from fxport.controlflow.operators.containers import container_registrar
from fxport.generation.caches import register_transformers_caches

container_registrar(register_transformers_caches)
