"""The floor every part of vxla imports: the element types of the numerics contract
(core.dtypes: names, widths, bit layouts, canonical NaNs), the root of the exception tree
(core.errors.VxlaError), files written whole or not at all (core.atomic_files) and the one
bounded least-recently-used map (core.lru). It needs only numpy and ml_dtypes and imports
nothing else of vxla, so attest (digests) and the compiler (arithmetic) read one owner of
each type fact."""
