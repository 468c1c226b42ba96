# Independent hash64 (CMF v2 §8) in Python, used to derive the known
# answers in tests/test_util_basics.c. Run: python3 tests/data/hash64_kat.py
M = (1 << 64) - 1
def fmix64(x):
    x ^= x >> 33; x = (x * 0xFF51AFD7ED558CCD) & M
    x ^= x >> 33; x = (x * 0xC4CEB9FE1A85EC53) & M
    x ^= x >> 33; return x
def hash64(b):
    acc = 0
    for i in range(0, len(b), 8):
        w = int.from_bytes(b[i:i + 8].ljust(8, b"\0"), "little")
        acc ^= fmix64(w) ^ ((i // 8) * 0x9E3779B97F4A7C15 & M)
    return fmix64(acc ^ len(b))
for s in [b"", b"a", b"abcdefgh", b"hello, cmf world"]:
    print(s, "0x%016xull" % hash64(s))
