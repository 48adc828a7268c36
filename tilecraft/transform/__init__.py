"""The compiler's passes, one per module (the list and its order: pipeline.py).

`PassConfigKey` is re-exported here because TileLang programs import it from
`tilelang.transform` as well as from `tilelang`."""


def __getattr__(name):
    if name == "PassConfigKey":
        from ..options import PassConfigKey
        return PassConfigKey
    raise AttributeError(f"module 'tilecraft.transform' has no attribute {name!r}")
