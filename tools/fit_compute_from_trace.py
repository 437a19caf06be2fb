#!/usr/bin/env python3
"""Derives the compute/host/contention numbers of a hardware profile from PyTorch profiler
traces of the same machine (the derivation of configs/hardware/a800-sxm-8x.json's
compute.memory_bandwidth_GBps, compute.memcpy_GBps, compute.gemm_table, host.*_overhead_us and
contention.compute_slowdown; see that file's "sources").

  tools/fit_compute_from_trace.py --megatron TRACE.json.gz --eager TRACE.json.gz

--megatron: a trace whose aten ops carry "Input Dims" (record_shapes=True): class bandwidths
            (bytes from each launching op's input shapes and dtypes) and in-training GEMM rates.
            (The FlashAttention-2 rates and the non-vectorized path's time per element come from
            `stepsim fit --trace` on the same trace; elementwise_strided here counts only the
            kernels moving more than 6 bytes per element, the ones their bytes hold.)
--eager:    an eager-PyTorch training trace: host dispatch cost (median interval between kernel
            launches on the forward thread and on the autograd thread, median cudaLaunchKernel
            duration) and contention (same kernel with and without a concurrent NCCL kernel).
--backward: eager training traces with Python stacks (with_stack=True), any number: the autograd
            engine's start per graph node (host.autograd_engine_per_node_us), the median over every
            backward call of the time from torch.autograd.backward's run_backward to the first
            evaluate_function, over the nodes that call evaluates.
Only calibration traces go here, never the traces a prediction is validated against.
"""
import argparse
import bisect
import collections
import gzip
import json
import re
import statistics

ELEM = {'c10::BFloat16': 2, 'c10::Half': 2, 'float': 4, 'double': 8, 'long int': 8, 'int': 4, 'bool': 1,
        'unsigned char': 1}


def load(path):
    with (gzip.open(path) if path.endswith('.gz') else open(path)) as f:
        return json.load(f)['traceEvents']


def numel(dims):
    n = 1
    for x in dims:
        n *= x
    return n


def launching_ops(ev):
    """(kernel event, innermost enclosing cpu_op of its runtime call) pairs."""
    rt = {e['args']['correlation']: e for e in ev if e.get('cat') == 'cuda_runtime' and 'correlation' in e.get('args', {})}
    by_tid = collections.defaultdict(list)
    for c in ev:
        if c.get('cat') == 'cpu_op':
            by_tid[c['tid']].append(c)
    starts = {}
    for t, lst in by_tid.items():
        lst.sort(key=lambda c: c['ts'])
        starts[t] = [c['ts'] for c in lst]
    for g in ev:
        if g.get('cat') != 'kernel':
            continue
        r = rt.get(g['args'].get('correlation'))
        if not r:
            continue
        lst, st = by_tid.get(r['tid'], []), starts.get(r['tid'], [])
        i = bisect.bisect_right(st, r['ts'])
        inner = None
        for c in lst[max(0, i - 60):i]:
            if c['ts'] <= r['ts'] <= c['ts'] + c['dur']:
                inner = c
        if inner:
            yield g, inner


def class_bandwidths(ev):
    out = collections.defaultdict(list)
    strided = []
    for g, op in launching_ops(ev):
        k, name, dur = re.sub(r'<.*', '', g['name']), op['name'], g['dur']
        dims, types = op['args'].get('Input Dims'), op['args'].get('Input type')
        if dur <= 3 or not dims:
            continue
        try:
            if name == 'aten::copy_' and k == 'void at::native::elementwise_kernel':
                strided.append((numel(dims[0]) * ELEM[types[0]] + numel(dims[1]) * ELEM[types[1]], numel(dims[0]), dur))
            elif name == 'aten::add' and k == 'void at::native::elementwise_kernel':
                n = max(numel(dims[0]), numel(dims[1]))
                strided.append(((numel(dims[0]) + numel(dims[1]) + n) * ELEM[types[0]], n, dur))
            elif 'vectorized_elementwise' in k and name in ('aten::native_dropout_backward', 'aten::add_', 'aten::mul', 'aten::add'):
                ins = sum(numel(d) * ELEM.get(t, 2) for d, t in zip(dims, types) if d)
                out['elementwise'].append((ins + numel(dims[0]) * ELEM.get(types[0], 2), dur))
            elif 'reduce_kernel' in k and name == 'aten::sum':
                out['reduction'].append((numel(dims[0]) * ELEM[types[0]], dur))
            elif 'cuApplyLayerNorm' in k:
                out['norm'].append((2 * numel(dims[0]) * ELEM[types[0]], dur))
            elif name == 'aten::index_select':
                n = numel(dims[2]) * dims[0][1]
                out['embedding'].append((2 * n * ELEM[types[0]] + numel(dims[2]) * 8, dur))
        except (KeyError, IndexError, TypeError):
            pass
    for g in ev:
        if g.get('cat') == 'gpu_memcpy' and 'DtoD' in g['name'] and g['args'].get('bytes', 0) >= 16e6:
            out['copy'].append((2 * g['args']['bytes'], 2 * g['args']['bytes'] / g['args']['memory bandwidth (GB/s)'] / 1e3))
        if g.get('cat') == 'kernel' and 'AdamFunctor' in g['name'] and g['args'].get('grid', [0])[0] == 320:
            # 320 chunks of 65,536 fp32 elements; p, g, m, v read, p, m, v written: 28 B per element.
            out['optimizer'].append((320 * 65536 * 28, g['dur']))
    rates = {c: round(statistics.median(b / d / 1e3 for b, d in v)) for c, v in out.items()}
    # The bf16 non-vectorized kernels (<= 6 bytes per element) cost per element, not per byte.
    byte_bound = [(b, d) for b, n, d in strided if b > 6 * n]
    rates['elementwise_strided'] = (round(statistics.median(b / d / 1e3 for b, d in byte_bound)) if len(byte_bound) >= 8
                                    else f'{len(byte_bound)} kernels of more than 6 bytes per element: too few')
    return rates


def memcpy_rate(ev):
    """compute.memcpy_GBps: device-to-device cudaMemcpyAsync read + write bandwidth, twice the median
    of Kineto's 'memory bandwidth (GB/s)' (payload bytes over duration) of the DtoD memcpys >= 16 MB."""
    bw = [g['args']['memory bandwidth (GB/s)'] for g in ev
          if g.get('cat') == 'gpu_memcpy' and 'DtoD' in g['name'] and g['args'].get('bytes', 0) >= 16e6]
    return round(2 * statistics.median(bw), 1) if bw else None


def gemm_rates(ev, peak_tflops):
    per = collections.defaultdict(list)
    for g, op in launching_ops(ev):
        dims = op['args'].get('Input Dims')
        if op['name'] == 'aten::mm' and dims and len(dims[0]) == 2 and len(dims[1]) == 2:
            (m, k), (_, n) = dims[0], dims[1]
            per[(m, n, k)].append(2 * m * n * k / g['dur'] / 1e6)
    return [{'m': m, 'n': n, 'k': k, 'dtype': 'bf16', 'tflops': round(statistics.median(v), 1),
             'fraction_of_peak': round(statistics.median(v) / peak_tflops, 3), 'calls': len(v)}
            for (m, n, k), v in sorted(per.items())]


def host_dispatch(ev):
    launches = collections.defaultdict(list)
    for e in ev:
        if e.get('cat') == 'cuda_runtime' and e['name'] in ('cudaLaunchKernel', 'cuLaunchKernel', 'cudaLaunchKernelExC'):
            launches[e['tid']].append(e)
    autograd = collections.Counter(e['tid'] for e in ev if e.get('cat') == 'cpu_op'
                                   and e['name'].startswith('autograd::engine::evaluate_function'))
    bw_tid = autograd.most_common(1)[0][0] if autograd else None
    res = {}
    for tid, lst in launches.items():
        if len(lst) < 50:
            continue
        lst.sort(key=lambda e: e['ts'])
        deltas = [b['ts'] - a['ts'] for a, b in zip(lst, lst[1:]) if b['ts'] - a['ts'] < 1000]
        res['autograd_op_overhead_us' if tid == bw_tid else 'eager_op_overhead_us'] = statistics.median(deltas)
        res.setdefault('kernel_launch_overhead_us', statistics.median(e['dur'] for e in lst))
    return res


def autograd_engine_start(ev):
    """Per backward call (Python's run_backward span): (nodes evaluated, us to the first node)."""
    nodes = sorted((e['ts'], e['dur']) for e in ev if e.get('ph') == 'X' and e.get('cat') == 'cpu_op'
                   and e['name'].startswith('autograd::engine::evaluate_function'))
    starts = [t for t, _ in nodes]
    calls = []
    for r in ev:
        if r.get('ph') == 'X' and r.get('cat') == 'python_function' and 'run_backward' in r['name']:
            i, j = bisect.bisect_left(starts, r['ts']), bisect.bisect_right(starts, r['ts'] + r['dur'])
            if j > i:
                calls.append((j - i, starts[i] - r['ts']))
    return calls


def kernel_gap(ev):
    """Mean device-side gap between consecutive kernels of a stream when the second was already
    queued (its launch call returned more than 20 us before the first ended)."""
    rt = {e['args']['correlation']: e for e in ev if e.get('cat') == 'cuda_runtime' and 'correlation' in e.get('args', {})}
    by_stream = collections.defaultdict(list)
    for e in ev:
        if e.get('cat') == 'kernel' and 'nccl' not in e['name']:
            by_stream[e['args'].get('stream')].append(e)
    gaps = []
    for lst in by_stream.values():
        lst.sort(key=lambda e: e['ts'])
        for a, b in zip(lst, lst[1:]):
            r = rt.get(b['args'].get('correlation'))
            end = a['ts'] + a['dur']
            if r and r['ts'] + r['dur'] < end - 20 and 0 <= b['ts'] - end < 100:
                gaps.append(b['ts'] - end)
    return {'kernel_gap_us': round(statistics.mean(gaps), 2), 'median_us': statistics.median(gaps), 'pairs': len(gaps)} if gaps else {}


def contention(ev):
    kernels = [e for e in ev if e.get('cat') == 'kernel']
    nccl = sorted((e['ts'], e['ts'] + e['dur']) for e in kernels if 'nccl' in e['name'])
    starts = [a for a, _ in nccl]

    def overlap_fraction(s, e):
        i = bisect.bisect_right(starts, e)
        return sum(max(0, min(b, e) - max(a, s)) for a, b in nccl[max(0, i - 50):i]) / (e - s)

    groups = collections.defaultdict(lambda: ([], []))
    for e in kernels:
        n = e['name']
        if 'nccl' in n or e['dur'] < 20 or not any(x in n for x in ('gemm', 'cutlass', 'conv', 'cudnn', 'xmma', 'sm80')):
            continue
        f = overlap_fraction(e['ts'], e['ts'] + e['dur'])
        key = (n, tuple(e['args'].get('grid', [])), tuple(e['args'].get('block', [])))
        if f == 0:
            groups[key][0].append(e['dur'])
        elif f > 0.9:
            groups[key][1].append(e['dur'])
    ratios = [statistics.median(b) / statistics.median(a) for a, b in groups.values() if len(a) >= 3 and len(b) >= 3]
    return {'compute_slowdown': round(statistics.median(ratios) - 1, 3), 'shapes': len(ratios)} if ratios else {}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--megatron', required=True)
    ap.add_argument('--eager', required=True)
    ap.add_argument('--backward', nargs='*', default=[])
    ap.add_argument('--peak-tflops', type=float, default=312.0)
    a = ap.parse_args()
    mg, eg = load(a.megatron), load(a.eager)
    calls = {path.split('/')[-1]: autograd_engine_start(load(path)) for path in a.backward}
    ratios = [us / n for c in calls.values() for n, us in c]
    engine = {'calls': calls, 'autograd_engine_per_node_us': round(statistics.median(ratios), 3)} if ratios else {}
    print(json.dumps({'memory_bandwidth_GBps': class_bandwidths(mg), 'memcpy_GBps': memcpy_rate(mg),
                      'gemm_table': gemm_rates(mg, a.peak_tflops),
                      'host': host_dispatch(eg), 'host_megatron': host_dispatch(mg), 'contention': contention(eg),
                      'kernel_gap': kernel_gap(eg), 'kernel_gap_megatron': kernel_gap(mg),
                      'autograd_engine': engine},
                     indent=2))


if __name__ == '__main__':
    main()
