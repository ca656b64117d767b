# A stand-in for numpy (tests/loaders_script.sh): what loaders.py's copy scenarios use of it.
uint8 = "uint8"
class _A(bytes):
    pass
def memmap(path, dtype=None, mode="r"):
    return _A(open(path, "rb").read())
def fromfile(path, dtype=None, count=-1, offset=0):
    with open(path, "rb") as f:
        f.seek(offset)
        return _A(f.read(count))
