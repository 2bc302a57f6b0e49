"""The architecture families, one file each (the table is
:data:`fxport.generation.architectures.FAMILIES`): how a decoder-only model, an encoder–decoder
model and Whisper are called for a prefill and for one step."""
