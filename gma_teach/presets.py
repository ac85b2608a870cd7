"""Sizes per chapter and scale; read them with :func:`gma_teach.preset`.

Each entry maps every scale of :data:`gma_teach.environment.SCALES` to keyword sizes (the same keys at every scale):

* ``tiny``   -- about two minutes a chapter on two CPU cores (CI runs every notebook twice);
* ``small``  -- at most about ten minutes a chapter on a laptop CPU;
* ``medium`` -- a free Colab T4 (16 GB, sm_75): at most about ten minutes and 12 GiB of GPU memory a chapter;
* ``full``   -- the paper's sizes, for a large GPU, only when asked. Chapters 9-10 then train a live demo at
  ``live_scale`` and show the recorded long runs named by ``recorded_runs``; chapter 11 reads the LM of
  ``lm_scale``.

:func:`gma_teach.cost.predict` turns each entry into a predicted time and peak memory on a device profile; the tests
in ``tests/test_cost.py`` hold every scale to its budget.
"""

PRESETS: dict[str, dict[str, dict]] = {
    # ch01: the quadratic wall -- softmax attention's time and memory against N (GMA and SDPA alongside).
    "ch01": {
        "tiny": dict(seq_lens=[256, 512, 1024, 2048], batch_size=1, n_heads=2, d_head=32, n_components=16, repeat=5,
                     n_demo=10, d_demo=4),
        "small": dict(seq_lens=[256, 512, 1024, 2048, 4096, 8192], batch_size=1, n_heads=4, d_head=64,
                      n_components=32, repeat=5, n_demo=10, d_demo=4),
        "medium": dict(seq_lens=[1024, 2048, 4096, 8192, 16384], batch_size=1, n_heads=4, d_head=64,
                       n_components=64, repeat=10, n_demo=10, d_demo=4),
        "full": dict(seq_lens=[1024, 2048, 4096, 8192, 16384], batch_size=1, n_heads=8, d_head=64, n_components=64,
                     repeat=10, n_demo=10, d_demo=4),
    },
    # ch02: diagonal GMMs -- the cancellation trap, scikit-learn agreement, EM against Adam.
    "ch02": {
        "tiny": dict(n_samples=600, d_route=2, n_components=3, n_em_iter=60, n_adam_steps=300, lr=0.05,
                     trap_points=512, trap_d_route=8, trap_shifts=[0.0, 1.0, 4.0, 16.0, 64.0, 256.0]),
        "small": dict(n_samples=3000, d_route=2, n_components=4, n_em_iter=200, n_adam_steps=1500, lr=0.05,
                      trap_points=4096, trap_d_route=16, trap_shifts=[0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0]),
        "medium": dict(n_samples=6000, d_route=2, n_components=5, n_em_iter=300, n_adam_steps=2000, lr=0.05,
                       trap_points=8192, trap_d_route=16, trap_shifts=[0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0]),
        "full": dict(n_samples=20000, d_route=2, n_components=5, n_em_iter=300, n_adam_steps=3000, lr=0.05,
                     trap_points=16384, trap_d_route=32, trap_shifts=[0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0]),
    },
    # ch03: the induced affinity -- heatmaps against softmax, rank and sign checks.
    "ch03": {
        "tiny": dict(n_tokens=48, d_route=2, n_components=4, rank_tokens=64, rank_components=[1, 2, 4, 8, 16, 32],
                     d_value=8),
        "small": dict(n_tokens=64, d_route=2, n_components=4, rank_tokens=128,
                      rank_components=[1, 2, 4, 8, 16, 32, 64], d_value=8),
        "medium": dict(n_tokens=64, d_route=2, n_components=4, rank_tokens=256,
                       rank_components=[1, 2, 4, 8, 16, 32, 64, 128], d_value=8),
        "full": dict(n_tokens=64, d_route=2, n_components=4, rank_tokens=256,
                     rank_components=[1, 2, 4, 8, 16, 32, 64, 128], d_value=8),
    },
    # ch04: sequence lengths of the time/memory sweep (naive stops at naive_max_len: its N x N matrix), routing
    # and value widths per head, K, and timing repeats.
    "ch04": {
        "tiny": dict(seq_lens=[128, 256, 512, 1024, 2048], naive_max_len=2048, batch_size=1, n_heads=2, d_route=16,
                     d_value=16, n_components=32, repeat=5,
                     demo=dict(n_tokens=10, n_components=4, d_route=2, d_value=3)),
        "small": dict(seq_lens=[128, 256, 512, 1024, 2048, 4096, 8192], naive_max_len=4096, batch_size=1, n_heads=4,
                      d_route=32, d_value=32, n_components=64, repeat=7,
                      demo=dict(n_tokens=10, n_components=4, d_route=2, d_value=3)),
        "medium": dict(seq_lens=[256, 512, 1024, 2048, 4096, 8192, 16384], naive_max_len=8192, batch_size=1,
                       n_heads=8, d_route=64, d_value=64, n_components=128, repeat=10,
                       demo=dict(n_tokens=10, n_components=4, d_route=2, d_value=3)),
        "full": dict(seq_lens=[256, 512, 1024, 2048, 4096, 8192, 16384, 32768], naive_max_len=16384, batch_size=1,
                     n_heads=8, d_route=64, d_value=64, n_components=128, repeat=10,
                     demo=dict(n_tokens=10, n_components=4, d_route=2, d_value=3)),
    },
    # ch05: the layer shown, the Lipschitz sweep over variance floors, and the training runs on the synthetic tasks
    # of gma_teach.tasks (majority: counting; recall: n_pairs pairs drawn from n_keys keys, n_keys >> K).
    # exercise_recall: the recall task of Exercise 5.3's answer, which trains GMA up to K = n_keys (at tiny and
    # small fewer keys than the chapter's, so that K = n_keys costs about what the chapter's K does). small trains
    # 400 steps: majority is solved by both mixers within 100, and on recall softmax leads GMA by 0.68 (0.52 at 600).
    "ch05": {
        "tiny": dict(d_model=32, n_heads=2, n_components=8, d_probe=16, init_stds=[0.3, 1.0, 3.0],
                     min_variances=[1.0, 0.1, 0.01, 0.001],
                     n_probe=512, seq_len=32, n_pairs=12, n_keys=64, n_values=8, n_train=4096, n_test=1024,
                     batch_size=64, n_steps=300, lr=3e-3, exercise_recall=dict(n_keys=16, n_pairs=8)),
        "small": dict(d_model=64, n_heads=4, n_components=16, d_probe=16, init_stds=[0.3, 1.0, 3.0],
                      min_variances=[1.0, 0.1, 0.01, 0.001, 0.0001], n_probe=4096, seq_len=64, n_pairs=24,
                      n_keys=256, n_values=16, n_train=16384, n_test=2048, batch_size=64, n_steps=400, lr=2e-3,
                      exercise_recall=dict(n_keys=32, n_pairs=16)),
        "medium": dict(d_model=128, n_heads=4, n_components=32, d_probe=32, init_stds=[0.3, 1.0, 3.0],
                       min_variances=[1.0, 0.1, 0.01, 0.001, 0.0001], n_probe=8192, seq_len=128, n_pairs=48,
                       n_keys=1024, n_values=32, n_train=32768, n_test=4096, batch_size=128, n_steps=3000, lr=1e-3,
                       exercise_recall=dict(n_keys=1024, n_pairs=48)),
        "full": dict(d_model=128, n_heads=4, n_components=32, d_probe=32, init_stds=[0.3, 1.0, 3.0],
                     min_variances=[1.0, 0.1, 0.01, 0.001, 0.0001], n_probe=16384, seq_len=128, n_pairs=48,
                     n_keys=1024, n_values=32, n_train=65536, n_test=4096, batch_size=128, n_steps=5000, lr=1e-3,
                     exercise_recall=dict(n_keys=1024, n_pairs=48)),
    },
    # ch06: the causal memory sweep (cumsum materializes (N, K, d_v); each form stops at its *_max_len), chunk sizes,
    # the recurrent decoding demo, and the from-scratch example (demo).
    "ch06": {
        "tiny": dict(seq_lens=[128, 256, 512, 1024, 2048], naive_max_len=2048, cumsum_max_len=2048, batch_size=1,
                     n_heads=2, d_route=16, d_value=16, n_components=32, chunk_size=64,
                     chunk_sizes=[8, 16, 32, 64, 128, 256], d_model=32, decode_len=64, repeat=3,
                     demo=dict(n_tokens=9, n_components=3, d_value=2)),
        "small": dict(seq_lens=[128, 256, 512, 1024, 2048, 4096, 8192], naive_max_len=4096, cumsum_max_len=8192,
                      batch_size=1, n_heads=4, d_route=32, d_value=32, n_components=64, chunk_size=64,
                      chunk_sizes=[8, 16, 32, 64, 128, 256], d_model=64, decode_len=256, repeat=5,
                      demo=dict(n_tokens=9, n_components=3, d_value=2)),
        "medium": dict(seq_lens=[256, 512, 1024, 2048, 4096, 8192, 16384], naive_max_len=8192, cumsum_max_len=8192,
                       batch_size=1, n_heads=8, d_route=64, d_value=64, n_components=128, chunk_size=64,
                       chunk_sizes=[16, 32, 64, 128, 256], d_model=256, decode_len=512, repeat=10,
                       demo=dict(n_tokens=9, n_components=3, d_value=2)),
        "full": dict(seq_lens=[256, 512, 1024, 2048, 4096, 8192, 16384, 32768], naive_max_len=16384,
                     cumsum_max_len=8192, batch_size=1, n_heads=8, d_route=64, d_value=64, n_components=128,
                     chunk_size=64, chunk_sizes=[16, 32, 64, 128, 256], d_model=256, decode_len=1024, repeat=10,
                     demo=dict(n_tokens=9, n_components=3, d_value=2)),
    },
    # ch07: the Triton chapter. demo = the step-by-step kernels; cases = odd (n_q, n_k, d, d_v, K, causal) sizes
    # checked against chapter 3's spec; precision = the cancellation table; timing = the live comparison (at small,
    # on a CPU, it times Triton's interpreter: N up to 512 and two repeats show its constants in under a minute).
    "ch07": {
        "tiny": dict(vector_len=1000, vector_block=256,
                     demo=dict(batch_size=1, n_heads=2, n_tokens=100, d_route=16, d_value=16, n_components=40,
                               chunk_size=32),
                     cases=[(17, 17, 5, 7, 3, False), (1, 100, 16, 5, 40, False), (100, 17, 5, 16, 3, False),
                            (17, 17, 16, 7, 40, True), (100, 100, 5, 16, 3, True)],
                     precision=dict(n_tokens=1024, d_route=64, n_components=128),
                     timing=dict(seq_lens=[128, 256], batch_size=1, n_heads=2, d_route=16, d_value=16,
                                 n_components=32, repeat=2)),
        "small": dict(vector_len=1000, vector_block=256,
                      demo=dict(batch_size=2, n_heads=2, n_tokens=200, d_route=16, d_value=16, n_components=40,
                                chunk_size=32),
                      cases=[(17, 17, 5, 7, 3, False), (1, 100, 16, 5, 40, False), (100, 17, 5, 16, 3, False),
                             (17, 17, 16, 7, 40, True), (100, 100, 5, 16, 3, True), (300, 300, 16, 16, 40, True)],
                      precision=dict(n_tokens=4096, d_route=64, n_components=128),
                      timing=dict(seq_lens=[128, 256], batch_size=1, n_heads=2, d_route=32, d_value=32,
                                  n_components=64, repeat=2)),
        "medium": dict(vector_len=1000, vector_block=256,
                       demo=dict(batch_size=2, n_heads=4, n_tokens=1000, d_route=64, d_value=64, n_components=128,
                                 chunk_size=64),
                       cases=[(17, 17, 5, 7, 3, False), (1, 100, 16, 5, 40, False), (100, 17, 5, 16, 3, False),
                              (17, 17, 16, 7, 40, True), (100, 100, 5, 16, 3, True), (1000, 1000, 64, 64, 128, True),
                              (1000, 3000, 64, 64, 256, False)],
                       precision=dict(n_tokens=4096, d_route=64, n_components=128),
                       timing=dict(seq_lens=[1024, 2048, 4096, 8192], batch_size=2, n_heads=8, d_route=64, d_value=64,
                                   n_components=128, repeat=10)),
        "full": dict(vector_len=1000, vector_block=256,
                     demo=dict(batch_size=2, n_heads=4, n_tokens=1000, d_route=64, d_value=64, n_components=128,
                               chunk_size=64),
                     cases=[(17, 17, 5, 7, 3, False), (1, 100, 16, 5, 40, False), (100, 17, 5, 16, 3, False),
                            (17, 17, 16, 7, 40, True), (100, 100, 5, 16, 3, True), (1000, 1000, 64, 64, 128, True),
                            (1000, 3000, 64, 64, 256, False)],
                     precision=dict(n_tokens=4096, d_route=64, n_components=128),
                     timing=dict(seq_lens=[1024, 4096, 16384], batch_size=8, n_heads=8, d_route=64, d_value=64,
                                 n_components=128, repeat=10)),
    },
    # ch08: the Table 1 protocol (gma_teach.profiling): one block of width d_model, forward + backward, every mixer
    # over seq_lens (GMA with n_components), GMA over k_values at k_sweep_len; full = the paper's width 768. small
    # stops at N = 4096 (a minute on two cores); the recorded sweep profiling_cpu_small.json reaches 8192 (its command
    # gives --seq-lens and --softmax-max-len).
    "ch08": {
        "tiny": dict(d_model=64, n_heads=2, batch_size=1, seq_lens=[128, 256, 512], n_components=16,
                     k_values=[8, 32, 64], k_sweep_len=256, n_features=32, linformer_k=32, softmax_max_len=512,
                     repeat=1, mixers=["softmax", "sdpa", "linear", "performer", "linformer", "mamba", "gma"]),
        "small": dict(d_model=256, n_heads=4, batch_size=1, seq_lens=[512, 1024, 2048, 4096], n_components=64,
                      k_values=[16, 32, 128, 256], k_sweep_len=2048, n_features=256, linformer_k=256,
                      softmax_max_len=4096, repeat=3,
                      mixers=["softmax", "sdpa", "linear", "performer", "linformer", "mamba", "gma"]),
        "medium": dict(d_model=512, n_heads=8, batch_size=2, seq_lens=[1024, 2048, 4096, 8192], n_components=128,
                       k_values=[32, 64, 256, 512], k_sweep_len=4096, n_features=256, linformer_k=256,
                       softmax_max_len=4096, repeat=5,
                       mixers=["softmax", "sdpa", "linear", "performer", "linformer", "mamba", "gma"]),
        "full": dict(d_model=768, n_heads=12, batch_size=8, seq_lens=[1024, 2048, 4096, 8192], n_components=128,
                     k_values=[64, 256, 512], k_sweep_len=4096, n_features=256, linformer_k=256,
                     softmax_max_len=4096, repeat=10,
                     mixers=["softmax", "sdpa", "linear", "performer", "linformer", "mamba", "gma"]),
    },
    # ch09: the chapter's live runs (mixers x seeds; each run's sizes: presets "listops" and "text" at live_scale),
    # the demo trees, how many generated trees the statistics use, and recorded_runs: glob patterns of the result
    # files (under gma_teach.measure.results_folder()) the chapter shows. At full the paper's runs (6 mixers x 3 seeds
    # x 20 epochs on 96k trees: days of GPU time) are loaded, never trained live; they are recorded with
    #   python -m gma_teach.experiments listops --mixer M --scale full --seeds 3 \
    #       --out book/results/listops_M_full.json
    # for M in gma sdpa linformer linear performer mamba (and the same with text). live_listops / live_text: preset
    # entries the live runs replace (at small: fewer trees and epochs than the recorded runs, in batches of similar
    # lengths, so that a cell takes well under a minute on a CPU: Text's stand-in leaves its majority class by the
    # third epoch; the recorded runs and studies show the longer training).
    "ch09": {
        "tiny": dict(mixers=["gma", "softmax", "linear", "performer"], seeds=[0], text_seeds=[0], demo_depth=3,
                     demo_args=4, demo_seed=1, n_stats=300, live_scale="tiny", live_listops={}, live_text={},
                     recorded_runs=["listops_*_small.json", "text_*_small.json"]),
        "small": dict(mixers=["gma", "softmax"], seeds=[0], text_seeds=[0], demo_depth=3,
                      demo_args=4, demo_seed=1, n_stats=1000, live_scale="small",
                      live_listops=dict(n_train=2000, epochs=2, length_buckets=8),
                      live_text=dict(epochs=3, length_buckets=8),
                      recorded_runs=["listops_*_small.json", "text_*_small.json"]),
        "medium": dict(mixers=["gma", "sdpa", "linear", "performer"], seeds=[0], text_seeds=[0], demo_depth=3,
                       demo_args=4, demo_seed=1, n_stats=2000, live_scale="medium", live_listops={}, live_text={},
                       recorded_runs=["listops_*_medium.json", "text_*_medium.json", "listops_*_small.json",
                                      "text_*_small.json"]),
        "full": dict(mixers=["gma", "sdpa", "linear", "performer"], seeds=[0], text_seeds=[0], demo_depth=3,
                     demo_args=4, demo_seed=1, n_stats=2000, live_scale="medium", live_listops={}, live_text={},
                     recorded_runs=["listops_*_full.json", "text_*_full.json"]),
    },
    # Experiments of chapters 9-10 (gma_teach.experiments). listops: LRA's generator settings and split sizes
    # (full = LRA: depth 10, 500 < length < 2000, 96k/2k/2k, 4 layers, width 512, 8 heads, MLP 1024), the encoder,
    # AdamW with warmup + cosine. small = the CPU preset that learns (notes: ~35% for softmax in ~77 s).
    # length_buckets (listops and text): 0 pads every batch to the split's longest sequence; b > 0 trains on
    # batches of similar lengths (windows of b batches sorted by length), each cut after its longest sequence.
    "listops": {
        "tiny": dict(source="generate", max_depth=4, max_args=10, min_length=10, max_length=64, n_train=384,
                     n_val=64, n_test=128, data_seed=0, d_model=32, n_layers=1, n_heads=2, d_ff=64, dropout=0.0,
                     pooling="cls", n_components=16, n_features=32, linformer_k=32, batch_size=32, epochs=2,
                     lr=2e-3, weight_decay=0.01, warmup_fraction=0.1, length_buckets=0),
        "small": dict(source="generate", max_depth=6, max_args=10, min_length=50, max_length=256, n_train=4000,
                      n_val=500, n_test=500, data_seed=0, d_model=64, n_layers=2, n_heads=4, d_ff=128, dropout=0.0,
                      pooling="cls", n_components=32, n_features=64, linformer_k=64, batch_size=32, epochs=4,
                      lr=1e-3, weight_decay=0.01, warmup_fraction=0.1, length_buckets=0),
        "medium": dict(source="generate", max_depth=8, max_args=10, min_length=100, max_length=512, n_train=10000,
                       n_val=1000, n_test=1000, data_seed=0, d_model=128, n_layers=2, n_heads=4, d_ff=256,
                       dropout=0.1, pooling="cls", n_components=64, n_features=128, linformer_k=128, batch_size=32,
                       epochs=8, lr=5e-4, weight_decay=0.01, warmup_fraction=0.1, length_buckets=0),
        "full": dict(source="auto", max_depth=10, max_args=10, min_length=500, max_length=2000, n_train=96000,
                     n_val=2000, n_test=2000, data_seed=0, d_model=512, n_layers=4, n_heads=8, d_ff=1024,
                     dropout=0.1, pooling="cls", n_components=128, n_features=256, linformer_k=256, batch_size=32,
                     epochs=20, lr=1e-4, weight_decay=0.01, warmup_fraction=0.05, length_buckets=0),
    },
    # text: LRA Text = byte-level IMDb (full: 4000 bytes, 4 layers, width 256, 4 heads, MLP 1024); offline
    # (tiny/small) the labelled stand-in "stdlib docstring -> package" (4 classes, ~1.4k docstrings).
    "text": {
        "tiny": dict(source="stdlib", n_train=384, n_test=128, max_length=96, data_seed=0, d_model=32, n_layers=1,
                     n_heads=2, d_ff=64, dropout=0.0, pooling="mean", n_components=16, n_features=32,
                     linformer_k=32, batch_size=32, epochs=2, lr=2e-3, weight_decay=0.01, warmup_fraction=0.1,
                     length_buckets=0),
        "small": dict(source="stdlib", n_train=1000, n_test=370, max_length=256, data_seed=0, d_model=64,
                      n_layers=2, n_heads=4, d_ff=128, dropout=0.0, pooling="mean", n_components=32,
                      n_features=64, linformer_k=64, batch_size=32, epochs=5, lr=1e-3, weight_decay=0.01,
                      warmup_fraction=0.1, length_buckets=0),
        "medium": dict(source="stdlib", n_train=1000, n_test=370, max_length=512, data_seed=0, d_model=128,
                       n_layers=2, n_heads=4, d_ff=256, dropout=0.1, pooling="mean", n_components=64,
                       n_features=128, linformer_k=128, batch_size=32, epochs=10, lr=1e-3, weight_decay=0.01,
                       warmup_fraction=0.1, length_buckets=0),
        "full": dict(source="imdb", n_train=25000, n_test=25000, max_length=4000, data_seed=0, d_model=256,
                     n_layers=4, n_heads=4, d_ff=1024, dropout=0.1, pooling="mean", n_components=128,
                     n_features=256, linformer_k=256, batch_size=32, epochs=20, lr=1e-4, weight_decay=0.01,
                     warmup_fraction=0.05, length_buckets=0),
    },
    # ch10: the chapter's live runs (each run's sizes: preset "lm" at live_scale), generation and decoding-memory demo
    # lengths, and recorded_runs (as in ch09). At full the paper's WikiText-103 runs (20k steps at context 1024) are
    # loaded, recorded with python -m gma_teach.experiments lm --mixer M --scale full --out
    # book/results/lm_M_full.json for M in gma sdpa linear performer mamba. live_lm: preset entries the live runs
    # replace (at small: 100 steps instead of the recorded runs' 400, so that a run takes about a minute on a CPU);
    # exercise_lm: the same for each of the three models of Exercise 10.2's answer (at small: 20 steps of 8 blocks,
    # a trained model for the state and speed columns in seconds; telling the losses apart needs the recorded study).
    "ch10": {
        "tiny": dict(mixers=["sdpa", "linear", "performer"], seeds=[0], prompt="The Python", n_generate=24,
                     memory_steps=64, temperature=0.8, top_k=20, live_scale="tiny", live_lm={},
                     exercise_lm={}, recorded_runs=["lm_*_small.json"]),
        "small": dict(mixers=["sdpa"], seeds=[0], prompt="The Python", n_generate=48,
                      memory_steps=128, temperature=0.8, top_k=40, live_scale="small",
                      live_lm=dict(n_steps=100, eval_every=50),
                      exercise_lm=dict(n_steps=20, eval_every=20, batch_size=8),
                      recorded_runs=["lm_*_small.json"]),
        "medium": dict(mixers=["sdpa", "linear", "performer"], seeds=[0], prompt="The Python", n_generate=64,
                       memory_steps=256, temperature=0.8, top_k=40, live_scale="medium", live_lm={},
                       exercise_lm={},
                       recorded_runs=["lm_*_medium.json", "lm_*_small.json"]),
        "full": dict(mixers=["sdpa", "linear", "performer"], seeds=[0], prompt="The Python", n_generate=128,
                     memory_steps=256, temperature=0.8, top_k=40, live_scale="medium", live_lm={},
                     exercise_lm={}, recorded_runs=["lm_*_full.json"]),
    },
    # lm: causal LM. full = the paper's WikiText-103 setting (GPT-2 BPE, context 1024, ~46M parameters, K 128/256);
    # tiny/small/medium: the offline standard-library corpus with GPT-2 BPE compacted to the ids that occur. small
    # trains 400 steps so that chapter 10's three live runs fit its ten minutes; the recorded lm_*_small.json runs
    # are this setting's (`python -m gma_teach.experiments lm --mixer M --scale small`).
    "lm": {
        "tiny": dict(source="stdlib", tokenizer="auto", seq_len=64, max_train_tokens=120_000,
                     max_val_tokens=8192, compact_vocab=True, data_seed=0, d_model=32, n_layers=1, n_heads=2,
                     d_ff=128, dropout=0.0, n_components=16, n_components_sweep=[8, 16], n_features=32,
                     batch_size=8, n_steps=40, eval_every=20, lr=3e-3, weight_decay=0.01, warmup_fraction=0.1),
        "small": dict(source="stdlib", tokenizer="auto", seq_len=128, max_train_tokens=None,
                      max_val_tokens=None, compact_vocab=True, data_seed=0, d_model=128, n_layers=2, n_heads=4,
                      d_ff=512, dropout=0.0, n_components=64, n_components_sweep=[64], n_features=64,
                      batch_size=16, n_steps=400, eval_every=200, lr=2e-3, weight_decay=0.01, warmup_fraction=0.05),
        "medium": dict(source="stdlib", tokenizer="auto", seq_len=256, max_train_tokens=None,
                       max_val_tokens=None, compact_vocab=True, data_seed=0, d_model=256, n_layers=4, n_heads=4,
                       d_ff=1024, dropout=0.1, n_components=64, n_components_sweep=[32, 64], n_features=128,
                       batch_size=16, n_steps=1500, eval_every=250, lr=1e-3, weight_decay=0.1, warmup_fraction=0.05),
        "full": dict(source="wikitext-103", tokenizer="gpt2", seq_len=1024, max_train_tokens=None,
                     max_val_tokens=None, compact_vocab=False, data_seed=0, d_model=512, n_layers=6, n_heads=8,
                     d_ff=2048, dropout=0.1, n_components=256, n_components_sweep=[128, 256], n_features=256,
                     batch_size=16, n_steps=20000, eval_every=2000, lr=6e-4, weight_decay=0.1, warmup_fraction=0.02),
    },
    # ch11: reading the routing of chapter 10's LM -- validation tokens analysed (the paper: 65,536), permutation
    # shuffles, the sizes of the pictures (tokens in the heatmap/strip, points in the PCA, components shown), and
    # lm_scale: the scale of chapter 10's LM that is read (at full: the live demo's, not the days-long run);
    # information_shuffles and untrained_seeds: the routing information's shuffled baseline and untrained draws.
    "ch11": {
        "tiny": dict(n_tokens=4096, n_shuffles=30, information_shuffles=10, untrained_seeds=3,
                     heatmap_tokens=48, strip_tokens=96, pca_points=1500,
                     top_components=16, seed=0, lm_scale="tiny"),
        "small": dict(n_tokens=16384, n_shuffles=100, information_shuffles=20, untrained_seeds=3,
                      heatmap_tokens=64, strip_tokens=160, pca_points=4000,
                      top_components=20, seed=0, lm_scale="small"),
        "medium": dict(n_tokens=32768, n_shuffles=100, information_shuffles=20, untrained_seeds=3,
                       heatmap_tokens=64, strip_tokens=160, pca_points=5000,
                       top_components=24, seed=0, lm_scale="medium"),
        "full": dict(n_tokens=65536, n_shuffles=100, information_shuffles=20, untrained_seeds=3,
                     heatmap_tokens=64, strip_tokens=160, pca_points=6000,
                     top_components=24, seed=0, lm_scale="medium"),
    },
    # ch12: what the memory holds -- the exact demo (n_slots slots, pairs up to max_pairs; forgetting with decays and
    # a router's leak; the recency horizon at horizon_slots; Monte Carlo trials of random routing), the state-byte
    # table (state_width, state_seq_lens, gma_ks), and the live MQAR run: sdpa and GMA K=live_gma_k at live_width,
    # trained by gma_teach.study.train_run on RECALL_STUDY with the sizes of `live` (tiny: < 30 s on one core;
    # small: 400 steps, 20 s a run, where SDPA already recalls every pair and GMA K=32 a small share).
    "ch12": {
        "tiny": dict(seed=0, n_slots=16, max_pairs=48, decays=[0.9, 0.7], leak=0.1, horizon_slots=[16, 64, 256],
                     mc_trials=400, state_width=64, state_seq_lens=[64, 1024], gma_ks=[8, 32, 128],
                     live=dict(seq_len=32, vocab_size=64, kv_pairs=[2, 4, 8], n_train=2048, n_val=64, n_test=256,
                               steps=250, batch_size=32, warmup=25),
                     live_width=32, live_lr=3e-3, live_gma_k=8),
        "small": dict(seed=0, n_slots=32, max_pairs=96, decays=[0.9, 0.7], leak=0.1, horizon_slots=[16, 64, 256],
                      mc_trials=2000, state_width=64, state_seq_lens=[64, 1024], gma_ks=[8, 32, 128],
                      live=dict(seq_len=64, vocab_size=256, kv_pairs=[4, 8, 16], n_train=16384, n_val=200,
                                n_test=500, steps=400, batch_size=64, warmup=25),
                      live_width=64, live_lr=3e-3, live_gma_k=32),
        "medium": dict(seed=0, n_slots=32, max_pairs=96, decays=[0.9, 0.7], leak=0.1, horizon_slots=[16, 64, 256],
                       mc_trials=4000, state_width=128, state_seq_lens=[64, 1024], gma_ks=[8, 32, 128],
                       live=dict(seq_len=64, vocab_size=512, kv_pairs=[4, 8, 16], n_train=20000, n_val=500,
                                 n_test=1000, steps=2000, batch_size=64, warmup=100),
                       live_width=128, live_lr=3e-3, live_gma_k=64),
        "full": dict(seed=0, n_slots=32, max_pairs=96, decays=[0.9, 0.7], leak=0.1, horizon_slots=[16, 64, 256],
                     mc_trials=4000, state_width=128, state_seq_lens=[64, 1024], gma_ks=[8, 32, 128],
                     live=dict(seq_len=64, vocab_size=512, kv_pairs=[4, 8, 16], n_train=20000, n_val=500,
                               n_test=1000, steps=3000, batch_size=64, warmup=150),
                     live_width=128, live_lr=3e-3, live_gma_k=64),
    },
}
