#!/usr/bin/env python3
"""gen-traces.py: write the allocation traces the arena benchmark replays.

    python3 tests/bench/traces/gen-traces.py [DIR]    (default: this script's directory)

Deterministic: fixed seeds, and only integer arithmetic on rng.random()
draws (no libm, no randrange), so every Python 3 writes the same bytes.
The generated files are committed; regenerate them after changing this
script and commit both.

Trace format (version 1), one operation per line:

    a ID BYTES    cuMemAlloc_v2(BYTES); ID (a decimal integer in
                  [0, 2^26), unique in the file; the replayer indexes an
                  array with it) names the block from now on
    f ID          cuMemFree_v2 of block ID
    # text        comment (also blank lines)

The replayer (tests/bench/arena-bench.c) calls the driver API exactly
as written, in one thread, and never synchronizes itself. Each trace is
what a kind of program issues to cuMemAlloc/cuMemFree, *after* any caching
that the program or its framework does on its own:

  tf-bfc-growth    TensorFlow's BFC allocator with allow_growth: regions of
                   2 MiB, doubling, never freed; the sub-allocation of tensors
                   inside regions never reaches the driver (simulated here
                   only to decide when a region is added).
  torch-caching    PyTorch's CUDA caching allocator as cudaMalloc sees it:
                   2 MiB segments for tensors <= 1 MiB, 20 MiB segments for
                   1-10 MiB, larger tensors rounded up to 2 MiB; blocks are
                   best-fit, split and merged inside segments (simulated),
                   segments cached and freed only by empty_cache().
  torch-nocache    the same PyTorch workload with PYTORCH_NO_CUDA_MEMORY_CACHING=1:
                   every tensor is its own cudaMalloc/cudaFree.
  workspaces       cuDNN/cuBLAS-like workspace buffers of 4 KiB .. 1 MiB,
                   2000-4000 live at once, freed and reallocated in bursts.
  naive-steps      a program with no allocator of its own: persistent
                   weights, then per step 8 buffers of 256 KiB .. 64 MiB,
                   all freed at the end of the step; 5 of them scale with
                   a sequence length that changes every few steps.

Every trace but tf-bfc-growth ends with everything freed.
"""
import os
import random
import sys

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30


class Trace:
    def __init__(self, name, seed, what):
        self.name = name
        self.seed = seed
        self.rng = random.Random(seed)
        self.what = what
        self.lines = []
        self.next_id = 0
        self.live = {}
        self.live_bytes = 0
        self.peak_live = 0
        self.allocs = 0
        self.frees = 0

    # -- draws: integer arithmetic only on top of rng.random() --------------
    def below(self, n):
        """An integer in [0, n)."""
        return min(int(self.rng.random() * n), n - 1)

    def between(self, lo, hi):
        """An integer in [lo, hi]."""
        return lo + self.below(hi - lo + 1)

    def chance(self, num, den):
        return self.below(den) < num

    def log_size(self, lo, hi, align):
        """A size in [lo, hi], roughly log-uniform: a random octave of
        [lo, hi], then uniform inside it; a multiple of align."""
        octaves = []
        o = lo
        while o < hi:
            octaves.append((o, min(2 * o, hi)))
            o *= 2
        a, b = octaves[self.below(len(octaves))]
        s = self.between(a, b)
        s = (s + align - 1) // align * align
        return max(lo, min(s, hi))

    # -- operations -----------------------------------------------------------
    def alloc(self, nbytes):
        assert nbytes > 0
        i = self.next_id
        self.next_id += 1
        self.lines.append("a %d %d" % (i, nbytes))
        self.live[i] = nbytes
        self.live_bytes += nbytes
        self.peak_live = max(self.peak_live, self.live_bytes)
        self.allocs += 1
        return i

    def free(self, i):
        self.lines.append("f %d" % i)
        self.live_bytes -= self.live.pop(i)
        self.frees += 1

    def comment(self, text):
        self.lines.append("# " + text)

    def write(self, directory):
        path = os.path.join(directory, self.name + ".trace")
        head = [
            "# cumemcap allocation trace, format 1",
            "# trace: %s" % self.name,
            "# seed: %d" % self.seed,
            "# generator: tests/bench/traces/gen-traces.py (deterministic; rerun to regenerate)",
        ]
        head += ["# what: " + w for w in self.what]
        head += [
            "# format: 'a ID BYTES' = cuMemAlloc_v2(BYTES), ID in [0, 2^26) unique in the file;",
            "#         'f ID' = cuMemFree_v2 of block ID; '#' starts a comment",
            "# allocs: %d, frees: %d, peak live: %d bytes, live at end: %d bytes"
            % (self.allocs, self.frees, self.peak_live, self.live_bytes),
        ]
        with open(path, "w", newline="\n") as f:
            f.write("\n".join(head + self.lines) + "\n")
        return path


# ---- (a) TensorFlow BFC, allow_growth ------------------------------------------

def tf_bfc_growth():
    t = Trace("tf-bfc-growth", 1001, [
        "TensorFlow BFCAllocator with allow_growth=true: Extend() asks the driver",
        "for a region of curr_region_allocation_bytes (2 MiB at first), doubling it",
        "after every region (or until a larger request fits); regions are never",
        "freed. Tensors are sub-allocated inside regions (simulated: a tensor",
        "must fit in one region's free bytes) and never reach the driver.",
    ])
    region_bytes = 2 * MiB
    regions = []            # free bytes per region
    tensors = []            # (region index, bytes)

    def bfc_alloc(nbytes):
        nonlocal region_bytes
        nbytes = (nbytes + 255) // 256 * 256
        for r, free in enumerate(regions):
            if free >= nbytes:
                regions[r] -= nbytes
                tensors.append((r, nbytes))
                return len(tensors) - 1
        increased = False
        while nbytes > region_bytes:
            region_bytes *= 2
            increased = True
        t.alloc(region_bytes)
        regions.append(region_bytes - nbytes)
        tensors.append((len(regions) - 1, nbytes))
        if not increased:
            region_bytes *= 2
        return len(tensors) - 1

    def bfc_free(k):
        r, nbytes = tensors[k]
        regions[r] += nbytes
        tensors[k] = None

    # Model building: small variables first (step counters, biases), then
    # weights; then training steps whose activations grow with the sequence
    # length of a curriculum.
    weights = [bfc_alloc(t.log_size(256, 64 * KiB, 4)) for _ in range(40)]
    weights += [bfc_alloc(t.log_size(4 * KiB, 48 * MiB, 256)) for _ in range(180)]
    t.comment("weights: %d tensors inside BFC regions" % len(weights))
    for step in range(60):
        seq = 128 + step * 32
        acts = []
        for _layer in range(24):
            for base in (8 * KiB, 256 * KiB, 2 * MiB):
                acts.append(bfc_alloc(base * seq // 128 + t.below(64) * 256))
        for k in reversed(acts):
            bfc_free(k)
    t.comment("%d regions, never freed" % len(regions))
    return t


# ---- (b) PyTorch caching allocator ---------------------------------------------

class TorchCaching:
    """CUDACachingAllocator's segment behaviour, simplified: two pools,
    best-fit free block (smallest that fits, then lowest address), split
    when the rest is worth keeping, merge with free neighbours on free,
    empty_cache() frees every wholly free segment."""
    SMALL = 1 * MiB
    SMALL_BUFFER = 2 * MiB
    LARGE_BUFFER = 20 * MiB
    MIN_LARGE_ALLOC = 10 * MiB
    ROUND_LARGE = 2 * MiB

    def __init__(self, trace):
        self.t = trace
        self.segments = {}   # trace id -> [pool, [blocks]]; block = [offset, size, used]
        self.tensors = {}    # tensor key -> (segment id, offset)
        self.next_key = 0

    @staticmethod
    def round_size(n):
        return 512 if n < 512 else (n + 511) // 512 * 512

    def alloc(self, nbytes):
        size = self.round_size(nbytes)
        small = size <= self.SMALL
        best = None
        for sid, (pool, blocks) in self.segments.items():
            if pool != small:
                continue
            for b in blocks:
                if not b[2] and b[1] >= size and (best is None or (b[1], sid, b[0]) < best[0]):
                    best = ((b[1], sid, b[0]), sid, b)
        if best is None:
            if small:
                seg = self.SMALL_BUFFER
            elif size < self.MIN_LARGE_ALLOC:
                seg = self.LARGE_BUFFER
            else:
                seg = (size + self.ROUND_LARGE - 1) // self.ROUND_LARGE * self.ROUND_LARGE
            sid = self.t.alloc(seg)
            b = [0, seg, False]
            self.segments[sid] = [small, [b]]
        else:
            _, sid, b = best
        blocks = self.segments[sid][1]
        rest = b[1] - size
        if (small and rest >= 512) or (not small and rest > self.SMALL):
            i = blocks.index(b)
            blocks.insert(i + 1, [b[0] + size, rest, False])
            b[1] = size
        b[2] = True
        key = self.next_key
        self.next_key += 1
        self.tensors[key] = (sid, b[0])
        return key

    def free(self, key):
        sid, off = self.tensors.pop(key)
        blocks = self.segments[sid][1]
        i = next(k for k, b in enumerate(blocks) if b[0] == off)
        blocks[i][2] = False
        if i + 1 < len(blocks) and not blocks[i + 1][2]:
            blocks[i][1] += blocks[i + 1][1]
            del blocks[i + 1]
        if i > 0 and not blocks[i - 1][2]:
            blocks[i - 1][1] += blocks[i][1]
            del blocks[i]

    def empty_cache(self):
        for sid in [s for s, (_, bl) in self.segments.items() if len(bl) == 1 and not bl[0][2]]:
            del self.segments[sid]
            self.t.free(sid)


class TorchDirect:
    """PyTorch with PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor is its
    own cudaMalloc (of the caching allocator's rounded size) and cudaFree."""

    def __init__(self, trace):
        self.t = trace

    round_size = staticmethod(TorchCaching.round_size)

    def alloc(self, nbytes):
        return self.t.alloc(self.round_size(nbytes))

    def free(self, key):
        self.t.free(key)

    def empty_cache(self):
        pass


def transformer_steps(t, pt, steps):
    """A 12-layer transformer, fp16, batch 8, through allocator pt."""
    hidden, heads, layers, batch, vocab = 1024, 16, 12, 8, 32000
    params = []
    for _ in range(layers):
        for shape in (4 * hidden * hidden, 4 * hidden, hidden * hidden, hidden,
                      4 * hidden * hidden, 4 * hidden, 4 * hidden * hidden, hidden,
                      2 * hidden, 2 * hidden):
            params.append(shape * 2)
    params.append(vocab * hidden * 2)
    weights = [pt.alloc(n) for n in params]
    adam = []
    grads = []
    seq = 512
    for step in range(steps):
        if step % 5 == 0:
            seq = 256 * t.between(1, 4) + 64 * t.below(4)
        tokens = batch * seq
        for g in grads:                       # zero_grad(set_to_none=True)
            pt.free(g)
        grads = []
        saved = []
        emb = pt.alloc(tokens * hidden * 2)
        saved.append(emb)
        for _l in range(layers):
            saved.append(pt.alloc(tokens * 4))                    # layernorm stats
            saved.append(pt.alloc(tokens * hidden * 2))           # ln out
            qkv = pt.alloc(3 * tokens * hidden * 2)
            saved.append(qkv)
            scores = pt.alloc(batch * heads * seq * seq * 2 // 8) # flash-like tiles
            saved.append(scores)
            saved.append(pt.alloc(tokens * hidden * 2))           # attn out
            saved.append(pt.alloc(tokens * 4 * hidden * 2))       # mlp up
            tmp = pt.alloc(tokens * 4 * hidden * 2)               # gelu temp
            pt.free(tmp)
            saved.append(pt.alloc(tokens * hidden * 2))           # mlp down
            mask = pt.alloc(tokens * hidden // 8 + t.below(4) * 512)  # dropout mask
            saved.append(mask)
        logits = pt.alloc(tokens * vocab * 2 // 16)                # chunked loss
        loss = pt.alloc(4)
        pt.free(logits)
        for key in reversed(saved):                                # backward
            tmp = pt.alloc(pt.round_size(2048 + t.below(512) * 512))
            pt.free(key)
            pt.free(tmp)
        for n in params:
            grads.append(pt.alloc(n))
        if not adam:
            for n in params:
                adam.append(pt.alloc(2 * n))
        tmp = [pt.alloc(n) for n in params[:8]]                    # optimizer temporaries
        for k in tmp:
            pt.free(k)
        pt.free(loss)
        if step % 40 == 39 and isinstance(pt, TorchCaching):
            pt.empty_cache()
            t.comment("step %d: empty_cache()" % step)
    for k in grads + adam + weights:
        pt.free(k)
    pt.empty_cache()
    t.comment("end: every tensor freed" + (", empty_cache()" if isinstance(pt, TorchCaching) else ""))


def torch_caching():
    t = Trace("torch-caching", 2002, [
        "PyTorch CUDACachingAllocator as cudaMalloc/cudaFree see it (simulated):",
        "tensors <= 1 MiB from 2 MiB segments, 1-10 MiB from 20 MiB segments,",
        "larger ones from segments of their size rounded up to 2 MiB; cached",
        "segments go back to the driver only in empty_cache(), called every 40",
        "steps and at the end. Workload: a 12-layer transformer, fp16, batch 8,",
        "sequence length changing every few steps (256..1024), Adam state,",
        "grads freed by zero_grad(set_to_none=True).",
    ])
    transformer_steps(t, TorchCaching(t), 400)
    return t


def torch_nocache():
    t = Trace("torch-nocache", 2112, [
        "PyTorch with PYTORCH_NO_CUDA_MEMORY_CACHING=1: every tensor is a",
        "cudaMalloc of its size rounded to 512 B and a cudaFree, so the",
        "driver sees the tensor churn itself. Same workload as torch-caching",
        "(12-layer transformer, fp16, batch 8, sequence length changing every",
        "few steps, Adam state, grads freed by zero_grad(set_to_none=True)),",
        "60 steps.",
    ])
    transformer_steps(t, TorchDirect(t), 60)
    return t


# ---- (c) workspace buffers -------------------------------------------------------

def workspaces():
    t = Trace("workspaces", 3003, [
        "cuDNN/cuBLAS-like workspace buffers of 4 KiB .. 1 MiB (log-uniform,",
        "multiples of 256 B, a third of them from a few common sizes),",
        "2000-4000 live at once, freed in bursts (random victims) and",
        "reallocated with new sizes.",
    ])
    common = [4 * KiB, 32 * KiB, 64 * KiB, 256 * KiB, 1 * MiB]
    live = []

    def size():
        if t.chance(1, 3):
            return common[t.below(len(common))]
        return t.log_size(4 * KiB, 1 * MiB, 256)

    for _ in range(3000):
        live.append(t.alloc(size()))
    while t.allocs + t.frees < 28000:
        target = t.between(2000, 4000)
        burst = t.between(100, 600)
        for _ in range(burst):
            if live and (len(live) > target or t.chance(1, 2)):
                k = live.pop(t.below(len(live)))
                t.free(k)
            else:
                live.append(t.alloc(size()))
    for k in live:
        t.free(k)
    return t


# ---- (d) naive per-step allocation -------------------------------------------

def naive_steps():
    t = Trace("naive-steps", 4004, [
        "a program with no allocator of its own (a training loop calling",
        "cudaMalloc/cudaFree directly): 32 persistent weight buffers (1-64 MiB),",
        "then 1500 steps that each allocate the same 8 kinds of buffer and free",
        "them all at the end of the step: 5 activation-like ones scale with the",
        "step's sequence length (a multiple of 64 in 256..1024, changed every",
        "5 steps on average; 256 KiB .. 64 MiB at full length), 3 workspace-like",
        "ones keep their size (256 KiB .. 16 MiB). Sizes are multiples of 4 B.",
    ])
    weights = [t.alloc(t.log_size(1 * MiB, 64 * MiB, 4)) for _ in range(32)]
    scaled = [t.log_size(256 * KiB, 64 * MiB, 4) for _ in range(5)]
    fixed = [t.log_size(256 * KiB, 16 * MiB, 4) for _ in range(3)]
    seq = 1024
    for _step in range(1500):
        if t.chance(1, 5):
            seq = 64 * t.between(4, 16)
        shapes = [max(256 * KiB, n * seq // 1024 // 4 * 4) for n in scaled] + fixed
        order = [0, 5, 1, 2, 6, 3, 7, 4]             # interleaved, as a forward pass would
        bufs = [t.alloc(shapes[k]) for k in order]
        if t.chance(1, 2):
            bufs.reverse()
        for k in bufs:
            t.free(k)
    for k in weights:
        t.free(k)
    return t


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for make in (tf_bfc_growth, torch_caching, torch_nocache, workspaces, naive_steps):
        t = make()
        path = t.write(out)
        print("%s: %d allocs, %d frees, peak live %.1f MiB, %d bytes on disk"
              % (path, t.allocs, t.frees, t.peak_live / MiB, os.path.getsize(path)))


if __name__ == "__main__":
    main()
