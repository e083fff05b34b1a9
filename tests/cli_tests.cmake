# The `stepgraph` CLI end to end (included from tests/CMakeLists.txt): training on digits, eval,
# explain, resume, the example configs, and every kind of bad input, which must end in a clear
# message and a non-zero exit, never a crash, and must not overwrite a previous run's files.
#
# Runs go to ${PROJECT_BINARY_DIR}/cli_runs/<name>. Fixtures order the tests that use another
# test's output (a checkpoint), so `ctest -R cli_` and `ctest -j` work.

set(SG_CLI "$<TARGET_FILE:stepgraph_cli>")
set(SG_RUNS "${PROJECT_BINARY_DIR}/cli_runs")
set(SG_CONFIGS "${PROJECT_SOURCE_DIR}/configs")
set(SG_DATA "${CMAKE_CURRENT_SOURCE_DIR}/data")
set(SG_SUMMARY_KEYS "event|steps|final_loss|us_per_step|accuracy|val_loss|device")

# sg_cli_ok(<name> ARGS <cli args>... [OUT <dir>] [STDOUT <regex>] [KEYS <k|k>]
#           [EQUAL <k=v|...>] [MIN <k=v|...>] [MAX <k=v|...>] [FILES <f|f>]
#           [SETUP <fixture>] [REQUIRES <fixture>...] [TIMEOUT <s>])
# OUT is removed before the run and passed as --out.
function(sg_cli_ok name)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "OUT;STDOUT;KEYS;EQUAL;MIN;MAX;FILES;SETUP;TIMEOUT"
                        "ARGS;REQUIRES")
  set(args ${A_ARGS})
  if(A_OUT)
    list(APPEND args --out "${A_OUT}")
  endif()
  list(JOIN args "|" joined)
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 120)
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${SG_CLI}|${joined}" "-DCLEAN_DIR=${A_OUT}"
                   "-DSTDOUT_REGEX=${A_STDOUT}" "-DSUMMARY_KEYS=${A_KEYS}"
                   "-DSUMMARY_EQUAL=${A_EQUAL}" "-DSUMMARY_MIN=${A_MIN}" "-DSUMMARY_MAX=${A_MAX}"
                   "-DFILES_EXIST=${A_FILES}" "-DTIMEOUT=${A_TIMEOUT}"
                   -P "${CMAKE_CURRENT_SOURCE_DIR}/expect_ok.cmake"
           WORKING_DIRECTORY "${PROJECT_BINARY_DIR}")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS cli)
  if(A_SETUP)
    set_tests_properties(${name} PROPERTIES FIXTURES_SETUP "${A_SETUP}")
  endif()
  if(A_REQUIRES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${A_REQUIRES}")
  endif()
endfunction()

# sg_cli_fail(<name> ARGS <cli args>... STDERR <regex> [STDOUT <regex>] [EXIT <code>]
#             [UNCHANGED <f|f>] [ABSENT <path|path>] [REQUIRES <fixture>...] [MEMORY_8G] [NO_PATH])
# MEMORY_8G runs it under `ulimit -v 8 GiB`, as on a machine with 8 GiB (CPU runs only: CUDA
# reserves more address space than that). NO_PATH runs it with a PATH that finds nothing (no
# python3).
# Library errors (sg::Error) exit with 1 and print "stepgraph: error: ..."; usage errors exit 2.
function(sg_cli_fail name)
  cmake_parse_arguments(PARSE_ARGV 1 A "MEMORY_8G;NO_PATH" "STDERR;STDOUT;EXIT;UNCHANGED;ABSENT" "ARGS;REQUIRES")
  if(NOT A_STDERR)
    message(FATAL_ERROR "sg_cli_fail(${name}): STDERR <regex> is required")
  endif()
  list(JOIN A_ARGS "|" joined)
  set(cmd "${SG_CLI}|${joined}")
  if(A_MEMORY_8G)
    set(cmd "sh|-c|ulimit -v 8388608 && exec \"$0\" \"$@\"|${cmd}")
  endif()
  if(A_NO_PATH)
    set(cmd "env|PATH=${CMAKE_CURRENT_BINARY_DIR}/no-such-dir|${cmd}")
  endif()
  add_test(NAME ${name}
           COMMAND ${CMAKE_COMMAND} "-DCMD=${cmd}" "-DSTDERR_REGEX=${A_STDERR}"
                   "-DSTDOUT_REGEX=${A_STDOUT}" "-DEXIT_CODE=${A_EXIT}"
                   "-DUNCHANGED=${A_UNCHANGED}" "-DABSENT=${A_ABSENT}"
                   "-DSNAPSHOT_DIR=${PROJECT_BINARY_DIR}/cli_runs/snapshots/${name}" -DTIMEOUT=60
                   -P "${CMAKE_CURRENT_SOURCE_DIR}/expect_fail.cmake"
           WORKING_DIRECTORY "${PROJECT_BINARY_DIR}")
  set_tests_properties(${name} PROPERTIES TIMEOUT 60 LABELS cli)
  if(A_REQUIRES)
    set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED "${A_REQUIRES}")
  endif()
endfunction()

# --- End to end on digits ----------------------------------------------------------------------

# The embedded default (same as configs/digits_mlp.json), 200 steps: the last line is the summary.
sg_cli_ok(cli_train_200_steps
  ARGS train --steps 200 --device cpu --json
  OUT "${SG_RUNS}/steps200"
  STDOUT "\"event\":\"progress\""
  KEYS "${SG_SUMMARY_KEYS}|checkpoint"
  EQUAL "event=summary|steps=200|device=cpu|task=classification"
  MIN "accuracy=0.85"
  FILES "${SG_RUNS}/steps200/checkpoint.safetensors|${SG_RUNS}/steps200/metrics.jsonl|${SG_RUNS}/steps200/config.json"
  SETUP cli_run200)

# The full default run: 1500 steps (about 3 s on the CPU), at least 95% validation accuracy.
sg_cli_ok(cli_train_default_reaches_95_percent
  ARGS train --json
  OUT "${SG_RUNS}/default"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=1500|val_size=360"
  MIN "accuracy=0.95"
  FILES "${SG_RUNS}/default/checkpoint.safetensors|${SG_RUNS}/default/metrics.jsonl|${SG_RUNS}/default/config.json"
  SETUP cli_default_run
  TIMEOUT 300)

# A user's text file as a character-level task (configs/text_transformer.json reads the README): 40 steps of the example
# transformer take the loss well below ln(vocabulary) ~ 4.7.
sg_cli_ok(cli_text_file_transformer
  ARGS train "${SG_CONFIGS}/text_transformer.json" --steps 40 --json
  OUT "${SG_RUNS}/text_transformer"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=40|task=classification"
  MAX "final_loss=4.0"
  TIMEOUT 300)

# A dense layer with amax: its output range in the progress lines and the JSON summary.
sg_cli_ok(cli_train_dense_amax_text
  ARGS train "${SG_DATA}/amax_dense.json"
  OUT "${SG_RUNS}/amax_text"
  STDOUT "step 50/100  loss [0-9.]+ .* 0\\.amax [0-9]+\\.[0-9]+")
sg_cli_ok(cli_train_dense_amax_json
  ARGS train "${SG_DATA}/amax_dense.json" --json
  OUT "${SG_RUNS}/amax_json"
  STDOUT "\"amax\":\\{\"0\\.amax\":[0-9.]+"
  KEYS "${SG_SUMMARY_KEYS}|amax"
  EQUAL "event=summary|steps=100")

# The human-readable form prints progress and a "done:" line.
sg_cli_ok(cli_train_text_output
  ARGS train --steps 50
  OUT "${SG_RUNS}/text"
  STDOUT "step 50/50  loss [0-9.]+.*done: 50 steps, final loss [0-9.]+, [0-9.]+ us/step on (cpu|cuda).*validation accuracy [0-9.]+%"
  FILES "${SG_RUNS}/text/checkpoint.safetensors|${SG_RUNS}/text/metrics.jsonl")

sg_cli_ok(cli_eval_default_checkpoint
  ARGS eval --checkpoint "${SG_RUNS}/default/checkpoint.safetensors" --json
  KEYS "event|steps|accuracy|val_loss|val_size"
  EQUAL "event=summary|steps=1500|val_size=360"
  MIN "accuracy=0.95"
  REQUIRES cli_default_run)

sg_cli_ok(cli_eval_text_output
  ARGS eval "${SG_CONFIGS}/digits_mlp.json" --checkpoint "${SG_RUNS}/default/checkpoint.safetensors"
  STDOUT "eval of '.*checkpoint.safetensors' \\(step 1500\\) on validation split of 360: loss [0-9.]+, accuracy 9[5-9]\\.[0-9]+%"
  REQUIRES cli_default_run)

sg_cli_ok(cli_resume_continues_the_step_count
  ARGS train --steps 260 --json --resume "${SG_RUNS}/steps200/checkpoint.safetensors"
  OUT "${SG_RUNS}/resumed260"
  STDOUT "resuming at step 200"
  EQUAL "event=summary|steps=260"
  FILES "${SG_RUNS}/resumed260/checkpoint.safetensors"
  REQUIRES cli_run200)

sg_cli_ok(cli_explain_default
  ARGS explain
  STDOUT "model: sequential\\(dense\\(256, relu.*input: \\[64, 64\\], output: \\[64, 10\\].*step program: [0-9]+ ops.*memory plan:")

sg_cli_ok(cli_explain_residual_batch
  ARGS explain "${SG_CONFIGS}/digits_residual.json" --batch 32
  STDOUT "residual.*input: \\[32, 64\\], output: \\[32, 10\\].*step program: [0-9]+ ops")

# --- The example configs train ------------------------------------------------------------------

foreach(example digits_mlp digits_residual digits_sgd_cosine)
  sg_cli_ok(cli_example_${example}
    ARGS train "${SG_CONFIGS}/${example}.json" --steps 300 --json
    OUT "${SG_RUNS}/example_${example}"
    KEYS "${SG_SUMMARY_KEYS}"
    EQUAL "event=summary|steps=300|task=classification"
    MIN "accuracy=0.9"
    FILES "${SG_RUNS}/example_${example}/checkpoint.safetensors")
endforeach()
set_tests_properties(cli_example_digits_residual PROPERTIES FIXTURES_SETUP cli_residual_run)

# The CNN example end to end (about 20 s on 2 CPU cores): at least 97% validation accuracy, and
# eval of its checkpoint with the same config rebuilds the image model (input_shape included).
sg_cli_ok(cli_example_digits_cnn_reaches_97_percent
  ARGS train "${SG_CONFIGS}/digits_cnn.json" --device cpu --json
  OUT "${SG_RUNS}/example_digits_cnn"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=600|task=classification|val_size=360|device=cpu"
  MIN "accuracy=0.97"
  FILES "${SG_RUNS}/example_digits_cnn/checkpoint.safetensors|${SG_RUNS}/example_digits_cnn/config.json"
  SETUP cli_cnn_run
  TIMEOUT 300)
# The same on the GPU (convolutions through cuDNN): skipped where there is no usable GPU.
sg_cli_ok(cli_example_digits_cnn_on_cuda
  ARGS train "${SG_CONFIGS}/digits_cnn.json" --device cuda --json
  OUT "${SG_RUNS}/example_digits_cnn_cuda"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=600|task=classification|val_size=360"
  MIN "accuracy=0.97"
  TIMEOUT 300)
# The report wraps long lines, so the patterns allow any break between words.
set_tests_properties(cli_example_digits_cnn_on_cuda PROPERTIES SKIP_REGULAR_EXPRESSION
  "no[^a-z]+usable[^a-z]+CUDA[^a-z]+driver;no[^a-z]+CUDA[^a-z]+device[^a-z]+found;has[^a-z]+no[^a-z]+CUDA[^a-z]+backend")
sg_cli_ok(cli_eval_digits_cnn_checkpoint
  ARGS eval "${SG_CONFIGS}/digits_cnn.json" --checkpoint "${SG_RUNS}/example_digits_cnn/checkpoint.safetensors" --json
  KEYS "event|steps|accuracy|val_loss|val_size"
  EQUAL "event=summary|steps=600|val_size=360"
  MIN "accuracy=0.97"
  REQUIRES cli_cnn_run)
sg_cli_ok(cli_explain_digits_cnn
  ARGS explain "${SG_CONFIGS}/digits_cnn.json" --batch 4
  STDOUT "input_shape=\\[8, 8, 1\\], conv2d\\(16, 3x3.*input: \\[4, 64\\], output: \\[4, 10\\].*reshape  'input.shaped.reshape': input\\[4, 64\\] -> input.shaped\\[4, 8, 8, 1\\].*conv2d_backward\\(relu")
# A second batch size after the first (--then-batch) with the tuning options (on the GPU the
# notes compare the two cuDNN compiles; on the CPU the options are accepted and the second shape
# is explained).
sg_cli_ok(cli_explain_then_batch
  ARGS explain "${SG_CONFIGS}/digits_cnn.json" --batch 4 --then-batch 2 --autotune heuristic --plan-cache off
  STDOUT "input: \\[2, 64\\], output: \\[2, 10\\].*autotune heuristic")
# bf16 attention is a CUDA option: the CPU accepts it (and computes attention in fp32).
# tf32x3 (fp32 accuracy on tensor cores) is a CUDA option the CPU accepts; a wrong name is refused.
sg_cli_ok(cli_explain_tf32x3_option
  ARGS explain "${SG_CONFIGS}/poisson2d_accurate.json" --device cpu --precision tf32x3
  STDOUT "precision tf32x3")
sg_cli_ok(cli_explain_attention_option
  ARGS explain "${SG_CONFIGS}/reverse_transformer.json" --device cpu --batch 2 --attention cudnn_bf16
  STDOUT "attention\\(4 heads, causal\\).*precision fp32, attention cudnn_bf16")
# Fusion and concurrent branches are CUDA lowering options; the CPU accepts them, and explain's
# options line lists them, on by default.
sg_cli_ok(cli_explain_fusion_concurrent_default
  ARGS explain --device cpu
  STDOUT "deterministic, fusion on, concurrent branches on")
sg_cli_ok(cli_explain_no_fusion_no_concurrent
  ARGS explain --device cpu --no-fusion --no-concurrent
  STDOUT "deterministic, fusion off, concurrent branches off")

# The decoder-only transformer learns the generated reverse task (untrained: about 5% of the
# answer tokens; 150 of the config's 300 steps reach 100% on the CPU in about 8 s).
sg_cli_ok(cli_example_reverse_transformer
  ARGS train "${SG_CONFIGS}/reverse_transformer.json" --steps 150 --device cpu --json
  OUT "${SG_RUNS}/example_reverse_transformer"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=150|task=classification|val_size=1000|device=cpu"
  MIN "accuracy=0.95"
  MAX "val_loss=0.2"
  FILES "${SG_RUNS}/example_reverse_transformer/checkpoint.safetensors"
  TIMEOUT 300)
# The same on the GPU (layer norm, embedding and attention kernels): skipped where there is no
# usable GPU.
sg_cli_ok(cli_example_reverse_transformer_on_cuda
  ARGS train "${SG_CONFIGS}/reverse_transformer.json" --steps 150 --device cuda --json
  OUT "${SG_RUNS}/example_reverse_transformer_cuda"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=150|task=classification|val_size=1000"
  MIN "accuracy=0.95"
  MAX "val_loss=0.2"
  TIMEOUT 300)
set_tests_properties(cli_example_reverse_transformer_on_cuda PROPERTIES SKIP_REGULAR_EXPRESSION
  "no[^a-z]+usable[^a-z]+CUDA[^a-z]+driver;no[^a-z]+CUDA[^a-z]+device[^a-z]+found;has[^a-z]+no[^a-z]+CUDA[^a-z]+backend")
# bf16 attention on the GPU: every attention op of the 4-block decoder through cuDNN's fused SDPA
# (4 forward and 4 backward plans); skipped where there is no usable GPU.
sg_cli_ok(cli_explain_tiny_gpt_bf16_on_cuda
  ARGS explain "${PROJECT_SOURCE_DIR}/bench/cnn_configs/tiny_gpt_bf16.json" --device cuda --batch 4
  STDOUT "cuDNN fused SDPA \\(bf16.*engine.*cuDNN fused SDPA backward \\(bf16.*cuDNN SDPA plans: 8.*attention cudnn_bf16")
set_tests_properties(cli_explain_tiny_gpt_bf16_on_cuda PROPERTIES SKIP_REGULAR_EXPRESSION
  "no[^a-z]+usable[^a-z]+CUDA[^a-z]+driver;no[^a-z]+CUDA[^a-z]+device[^a-z]+found;has[^a-z]+no[^a-z]+CUDA[^a-z]+backend")
sg_cli_ok(cli_explain_reverse_transformer
  ARGS explain "${SG_CONFIGS}/reverse_transformer.json" --batch 2
  STDOUT "transformer_block\\(4 heads, causal, mlp 64\\).*input: \\[2, 24\\], output: \\[2, 24, 21\\].*attention\\(4 heads, causal\\).*attention_backward\\(4 heads, causal\\).*embedding_backward")

# Regression: from a validation MSE of about 0.7 untrained to well under 0.1.
sg_cli_ok(cli_example_synthetic_regression
  ARGS train "${SG_CONFIGS}/synthetic_regression.json" --steps 300 --json
  OUT "${SG_RUNS}/example_synthetic_regression"
  KEYS "event|steps|final_loss|us_per_step|val_loss"
  EQUAL "event=summary|steps=300|task=regression|val_size=400"
  MAX "val_loss=0.1"
  FILES "${SG_RUNS}/example_synthetic_regression/checkpoint.safetensors")

# The same regression with a graph model (a concatenated skip of the input): it learns as well.
sg_cli_ok(cli_example_graph_regression
  ARGS train "${SG_CONFIGS}/graph_regression.json" --steps 300 --json
  OUT "${SG_RUNS}/example_graph_regression"
  EQUAL "event=summary|steps=300|task=regression|val_size=400"
  MAX "val_loss=0.1")
sg_cli_ok(cli_explain_graph_regression
  ARGS explain "${SG_CONFIGS}/graph_regression.json" --batch 4
  STDOUT "model\\(x = input\\[8\\]; h1 = dense\\(64, tanh.*skip = concat\\(h2, x; \\(axis -1\\)\\).*outputs y=head\\)")

# A DeepONet (two inputs, data by name from the antiderivative generator, loss by output): the
# validation MSE falls from about VAL0 untrained, and every line reports the term G.
sg_cli_ok(cli_example_deeponet
  ARGS train "${SG_CONFIGS}/deeponet.json" --steps 600 --json
  OUT "${SG_RUNS}/example_deeponet"
  KEYS "event|steps|final_loss|val_loss|val_terms|loss_terms"
  EQUAL "event=summary|steps=600|task=graph|val_size=1600"
  MAX "val_loss=0.05"
  FILES "${SG_RUNS}/example_deeponet/checkpoint.safetensors"
  SETUP deeponet_run)
sg_cli_ok(cli_eval_deeponet
  ARGS eval "${SG_CONFIGS}/deeponet.json" --checkpoint "${SG_RUNS}/example_deeponet/checkpoint.safetensors" --json
  EQUAL "event=summary|steps=600|task=graph|val_size=1600"
  MAX "val_loss=0.05"
  REQUIRES deeponet_run)
sg_cli_ok(cli_explain_deeponet
  ARGS explain "${SG_CONFIGS}/deeponet.json" --batch 4
  STDOUT "model\\(u = input\\[50\\]; y = input\\[1\\];.*outputs G=G\\)")

# Two inputs split from one generated X by column groups, batch norm and dropout, a device-resident
# data set (the gather of both inputs and the target in the step): the validation MSE falls from
# 2.2 untrained.
sg_cli_ok(cli_example_two_input_regression
  ARGS train "${SG_CONFIGS}/two_input_regression.json" --steps 600 --json
  OUT "${SG_RUNS}/example_two_input_regression"
  KEYS "event|steps|final_loss|val_loss|val_terms|loss_terms"
  EQUAL "event=summary|steps=600|task=graph|val_size=400"
  MAX "val_loss=0.1")
sg_cli_ok(cli_explain_two_input_regression
  ARGS explain "${SG_CONFIGS}/two_input_regression.json" --batch 4
  STDOUT "nx = batch_norm\\(momentum=0.1.*drop = dropout\\(0.1\\).*outputs y=y\\)")

# A small CSV file trains; its bad twins below differ only in one label.
sg_cli_ok(cli_train_csv
  ARGS train "${SG_DATA}/csv_ok.json" --json
  OUT "${SG_RUNS}/csv_ok"
  EQUAL "event=summary|steps=200|val_size=6"
  MIN "accuracy=0.8")

# predict: a checkpoint's predictions for an .npy file's rows; a wrong width is refused.
sg_cli_ok(cli_predict
  ARGS predict --checkpoint "${SG_RUNS}/steps200/checkpoint.safetensors" --input "${SG_DATA}/digits_rows.npy"
       --output "${SG_RUNS}/steps200_predictions.npy" --overwrite --json
  STDOUT "\"event\":\"predict\".*\"outputs\":10.*\"rows\":5"
  FILES "${SG_RUNS}/steps200_predictions.npy"
  REQUIRES cli_run200)

sg_cli_fail(cli_predict_wrong_width
  ARGS predict --checkpoint "${SG_RUNS}/steps200/checkpoint.safetensors" --input "${SG_DATA}/digits_rows_f64_narrow.npy"
       --output "${SG_RUNS}/never_written.npy"
  EXIT 1
  STDERR "^stepgraph: error: predict: the input '[^']*digits_rows_f64_narrow\\.npy' has 3 features per row; the model was trained on 64"
  ABSENT "${SG_RUNS}/never_written.npy"
  REQUIRES cli_run200)

# export: the checkpoint's weights under torch.nn.Sequential's names; an existing file is kept.
sg_cli_ok(cli_export_torch
  ARGS export --checkpoint "${SG_RUNS}/steps200/checkpoint.safetensors" --output "${SG_RUNS}/steps200_torch.safetensors"
       --overwrite --json
  STDOUT "\"event\":\"export\".*\"format\":\"torch\".*\"torch_module\":\"torch\\.nn\\.Sequential\\(torch\\.nn\\.Linear\\(64, "
  FILES "${SG_RUNS}/steps200_torch.safetensors"
  REQUIRES cli_run200)

sg_cli_fail(cli_export_keeps_an_existing_file
  ARGS export --checkpoint "${SG_RUNS}/steps200/checkpoint.safetensors" --output "${SG_RUNS}/steps200/config.json"
  EXIT 1
  STDERR "^stepgraph: error: export: the output '[^']*config\\.json' exists; choose another path or pass --overwrite"
  UNCHANGED "${SG_RUNS}/steps200/config.json"
  REQUIRES cli_run200)

# ONNX and plots come from the Python package: without it, a message that says how to get it.
sg_cli_fail(cli_export_onnx_needs_the_python_package
  ARGS export --checkpoint "${SG_RUNS}/steps200/checkpoint.safetensors" --output "${SG_RUNS}/steps200.onnx" --format onnx
  NO_PATH
  EXIT 1
  STDERR "^stepgraph export: error: this needs the Python package, which python3 is not there to run \\(pip install \\.\\[onnx\\]\\)"
  ABSENT "${SG_RUNS}/steps200.onnx"
  REQUIRES cli_run200)
sg_cli_fail(cli_plot_needs_the_python_package
  ARGS plot "${SG_RUNS}/steps200"
  NO_PATH
  EXIT 1
  STDERR "^stepgraph plot: error: this needs the Python package, which python3 is not there to run \\(pip install \\.\\[plot\\]\\)"
  REQUIRES cli_run200)

sg_cli_ok(cli_completion_bash
  ARGS completion bash
  STDOUT "complete -o filenames -F _stepgraph stepgraph")

# --- Usage errors: exit status 2, the nearest correct word named --------------------------------

sg_cli_ok(cli_version
  ARGS --version
  STDOUT "^stepgraph [0-9]+\\.[0-9]+\\.[0-9]+ \\((CUDA backend built in|CPU only: built without CUDA)\\)")

sg_cli_fail(cli_misspelt_command
  ARGS trian
  EXIT 2
  STDERR "^stepgraph: unknown command 'trian' \\(did you mean 'train'\\?\\); commands: train, launch, eval")

sg_cli_fail(cli_misspelt_option
  ARGS train --step 5
  EXIT 2
  STDERR "^stepgraph: unknown option '--step' for 'train' \\(did you mean '--steps'\\?\\); its options: ")

sg_cli_fail(cli_unknown_option_without_a_near_one
  ARGS explain --frobnicate
  EXIT 2
  STDERR "^stepgraph: unknown option '--frobnicate' for 'explain'; its options: ")

sg_cli_fail(cli_bad_option_value_is_a_usage_error
  ARGS train --device gpu
  EXIT 2
  STDERR "--device: gpu not in \\{auto,cpu,cuda\\}")

# --- Bad configs ---------------------------------------------------------------------------------

sg_cli_fail(cli_malformed_json
  ARGS train "${SG_DATA}/malformed.json" --json
  EXIT 1
  STDERR "^stepgraph: error: config '[^']*malformed\\.json' is not valid JSON: line 5, column 37( \\([^)]*\\))?: syntax error"
  STDOUT "\"event\":\"error\"")

sg_cli_fail(cli_unknown_key
  ARGS train "${SG_DATA}/unknown_key.json"
  EXIT 1
  STDERR "^stepgraph: error: config '[^']*unknown_key\\.json': model\\.layers\\[1\\]\\.activaton: unknown key; allowed keys here: type, units, activation, init, std, bias")

sg_cli_fail(cli_wrong_type
  ARGS train "${SG_DATA}/bad_units.json"
  EXIT 1
  STDERR "^stepgraph: error: .*model\\.layers\\[0\\]\\.units: expected an integer in \\[1, [0-9]+\\], got the string \"ten\"")

sg_cli_fail(cli_unknown_optimizer
  ARGS train "${SG_DATA}/unknown_optimizer.json"
  EXIT 1
  STDERR "^stepgraph: error: .*optimizer\\.type: unknown value \"rmsprop\"; allowed: sgd, adam, adamw")

sg_cli_fail(cli_sgd_with_adam_keys
  ARGS train "${SG_DATA}/sgd_with_adam_keys.json"
  EXIT 1
  STDERR "^stepgraph: error: .*optimizer\\.beta1: \"beta1\" is an Adam setting.*\"sgd\" takes lr, momentum")

sg_cli_fail(cli_cnn_without_input_shape
  ARGS train "${SG_DATA}/cnn_no_input_shape.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: conv2d layer '0' expects NHWC images \\[batch, height, width, channels\\], got \\[64, 64\\]; give the model an input_shape")

sg_cli_fail(cli_cnn_input_shape_mismatch
  ARGS train "${SG_DATA}/cnn_input_shape_mismatch.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: model\\.input_shape \\[7, 7, 1\\] holds 49 values per sample but data 'digits' \\(data\\.source \"digits\"\\) has 64 features per sample")

sg_cli_fail(cli_cnn_bad_activation
  ARGS train "${SG_DATA}/cnn_bad_activation.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: config '[^']*cnn_bad_activation\\.json': model\\.layers\\[0\\]\\.activation: unknown value \"tanh\"; allowed: none, relu")

sg_cli_fail(cli_cnn_kernel_too_large
  ARGS train "${SG_DATA}/cnn_kernel_too_large.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: conv2d layer '2': a 5x5 kernel with dilation 1 and padding 0 does not fit its 4x4 input \\[64, 4, 4, 8\\]")

sg_cli_fail(cli_sequence_vocab_too_small
  ARGS train "${SG_DATA}/seq_vocab_too_small.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: embedding: token id 8 at data '[^']*' row [0-9]+, position [0-9]+ is not an integer in \\[0, 8\\), the embedding's vocabulary"
  ABSENT "${PROJECT_BINARY_DIR}/runs/seq_vocab_too_small")

sg_cli_fail(cli_sequence_heads_do_not_divide
  ARGS train "${SG_DATA}/seq_heads_do_not_divide.json" --steps 2
  EXIT 1
  STDERR "^stepgraph: error: self_attention layer '1\\.0\\.1': width 30 does not split into 4 heads")

sg_cli_fail(cli_missing_config
  ARGS train "${SG_RUNS}/no_such_config.json"
  STDERR "File does not exist: .*no_such_config\\.json")

sg_cli_fail(cli_config_is_a_directory
  ARGS train "${SG_DATA}"
  STDERR "directory")

# --- Bad command lines ---------------------------------------------------------------------------

sg_cli_fail(cli_bad_device
  ARGS train --device gpu --steps 5
  STDERR "--device: gpu not in \\{auto,cpu,cuda\\}")

sg_cli_fail(cli_bad_attention
  ARGS train --attention bf16 --steps 5
  STDERR "--attention: bf16 not in \\{fp32,cudnn_bf16\\}")

sg_cli_fail(cli_bad_attention_in_config
  ARGS train "${SG_DATA}/bad_attention.json"
  EXIT 1
  STDERR "train\\.attention: unknown value \"fp16\"; allowed: fp32, cudnn_bf16")

sg_cli_fail(cli_bad_steps
  ARGS train --steps -5
  STDERR "--steps: expected an integer >= 1, got '-5'")

sg_cli_fail(cli_negative_seed
  ARGS train --seed -1 --steps 5
  STDERR "--seed: expected an integer >= 0, got '-1'")

sg_cli_fail(cli_no_subcommand
  STDERR "A subcommand is required")

sg_cli_fail(cli_eval_needs_a_checkpoint
  ARGS eval
  STDERR "--checkpoint is required")

sg_cli_fail(cli_eval_missing_checkpoint
  ARGS eval --checkpoint "${SG_RUNS}/no_such_checkpoint.safetensors"
  STDERR "File does not exist: .*no_such_checkpoint\\.safetensors")

# --- Data that does not fit the model ------------------------------------------------------------

sg_cli_fail(cli_inputs_mismatch
  ARGS train "${SG_DATA}/inputs_mismatch.json" --steps 5
  EXIT 1
  STDERR "^stepgraph: error: model\\.inputs is 60 but data 'digits' \\(data\\.source \"digits\"\\) has 64 features per sample")

sg_cli_fail(cli_explain_inputs_mismatch
  ARGS explain "${SG_DATA}/inputs_mismatch.json"
  EXIT 1
  STDERR "^stepgraph: error: model\\.inputs is 60 but .* has 64 features")

sg_cli_fail(cli_too_few_output_units
  ARGS train "${SG_DATA}/too_few_units.json" --steps 5
  EXIT 1
  STDERR "^stepgraph: error: model output has 5 units but data 'digits' .* has 10 classes \\(labels 0\\.\\.9\\): label 5 of sample 5 \\(0-based\\) is out of range \\[0, 5\\); set the last layer's units to at least 10")

sg_cli_fail(cli_regression_targets_mismatch
  ARGS train "${SG_DATA}/regression_targets.json" --steps 5
  EXIT 1
  STDERR "^stepgraph: error: model output has 3 units but .* has 2 regression targets per sample")

sg_cli_fail(cli_batch_larger_than_training_split
  ARGS train "${SG_DATA}/batch_too_large.json" --steps 5
  EXIT 1
  STDERR "^stepgraph: error: train\\.batch_size 5000 is larger than the training split \\(1437 samples")

sg_cli_fail(cli_csv_label_out_of_range
  ARGS train "${SG_DATA}/csv_bad_label.json" --out "${SG_RUNS}/csv_bad_label"
  EXIT 1
  STDERR "^stepgraph: error: model output has 3 units but data 'bad_label\\.csv' .* label 7 of sample 3 \\(0-based\\) is out of range \\[0, 3\\)")

sg_cli_fail(cli_csv_negative_label
  ARGS train "${SG_DATA}/csv_negative_label.json" --out "${SG_RUNS}/csv_negative_label"
  EXIT 1
  STDERR "^stepgraph: error: CSV file '[^']*negative_label\\.csv' line 7, column 4: class label -1 is out of range")

sg_cli_fail(cli_missing_data_file
  ARGS train "${SG_DATA}/csv_missing_file.json"
  EXIT 1
  STDERR "^stepgraph: error: cannot open CSV file '[^']*tests/data/no_such_file\\.csv': No such file or directory")

# --- Corrupt and truncated checkpoints: a message, and nothing overwritten ------------------------

# Truncated copies of the 200-step run's checkpoint: inside the JSON header, and inside the data.
add_test(NAME cli_make_truncated_checkpoints_header
  COMMAND ${CMAKE_COMMAND} "-DSRC=${SG_RUNS}/steps200/checkpoint.safetensors"
          "-DDST=${SG_RUNS}/corrupt/truncated_header.safetensors" -DKEEP=100
          -P "${CMAKE_CURRENT_SOURCE_DIR}/truncate_file.cmake")
add_test(NAME cli_make_truncated_checkpoints_data
  COMMAND ${CMAKE_COMMAND} "-DSRC=${SG_RUNS}/steps200/checkpoint.safetensors"
          "-DDST=${SG_RUNS}/corrupt/truncated_data.safetensors" -DKEEP=half
          -P "${CMAKE_CURRENT_SOURCE_DIR}/truncate_file.cmake")
set_tests_properties(cli_make_truncated_checkpoints_header cli_make_truncated_checkpoints_data PROPERTIES
  FIXTURES_REQUIRED cli_run200 FIXTURES_SETUP cli_truncated LABELS cli)

set(SG_RUN200_FILES
    "${SG_RUNS}/steps200/checkpoint.safetensors|${SG_RUNS}/steps200/metrics.jsonl|${SG_RUNS}/steps200/config.json")

# --resume with a bad file into a folder that holds a good run: the run's files stay
# byte-identical (the checkpoint is validated before anything is written).
foreach(kind header data)
  sg_cli_fail(cli_resume_truncated_${kind}_overwrites_nothing
    ARGS train --steps 300 --resume "${SG_RUNS}/corrupt/truncated_${kind}.safetensors"
         --out "${SG_RUNS}/steps200" --overwrite
    EXIT 1
    STDERR "^stepgraph: error: safetensors file '[^']*truncated_${kind}\\.safetensors': "
    UNCHANGED "${SG_RUN200_FILES}"
    REQUIRES cli_run200 cli_truncated)
  sg_cli_fail(cli_eval_truncated_${kind}
    ARGS eval --checkpoint "${SG_RUNS}/corrupt/truncated_${kind}.safetensors"
    EXIT 1
    STDERR "^stepgraph: error: safetensors file '[^']*truncated_${kind}\\.safetensors': "
    REQUIRES cli_truncated)
endforeach()

# With another config than the folder's run: its config.json must not be replaced either.
sg_cli_fail(cli_resume_truncated_other_config_overwrites_nothing
  ARGS train "${SG_CONFIGS}/digits_sgd_cosine.json" --steps 300
       --resume "${SG_RUNS}/corrupt/truncated_data.safetensors" --out "${SG_RUNS}/steps200" --overwrite
  EXIT 1
  STDERR "^stepgraph: error: safetensors file '[^']*truncated_data\\.safetensors': "
  UNCHANGED "${SG_RUN200_FILES}"
  REQUIRES cli_run200 cli_truncated)

sg_cli_fail(cli_resume_not_a_checkpoint_overwrites_nothing
  ARGS train --steps 300 --resume "${SG_DATA}/not_a_checkpoint.safetensors" --out "${SG_RUNS}/steps200" --overwrite
  EXIT 1
  STDERR "^stepgraph: error: safetensors file '[^']*not_a_checkpoint\\.safetensors': header length [0-9]+ exceeds"
  UNCHANGED "${SG_RUN200_FILES}"
  REQUIRES cli_run200)

sg_cli_fail(cli_eval_not_a_checkpoint
  ARGS eval --checkpoint "${SG_DATA}/not_a_checkpoint.safetensors" --json
  EXIT 1
  STDERR "^stepgraph: error: safetensors file '[^']*not_a_checkpoint\\.safetensors': header length"
  STDOUT "\"event\":\"error\"")

# A valid checkpoint of another model (the residual example) is refused, naming the tensor.
sg_cli_fail(cli_resume_other_model_overwrites_nothing
  ARGS train --steps 300 --resume "${SG_RUNS}/example_digits_residual/checkpoint.safetensors"
       --out "${SG_RUNS}/steps200" --overwrite
  EXIT 1
  STDERR "^stepgraph: error: checkpoint '[^']*example_digits_residual/checkpoint\\.safetensors' was saved from another setup:\n  model: "
  UNCHANGED "${SG_RUN200_FILES}"
  REQUIRES cli_run200 cli_residual_run)

sg_cli_fail(cli_eval_other_model
  ARGS eval --checkpoint "${SG_RUNS}/example_digits_residual/checkpoint.safetensors"
  EXIT 1
  STDERR "^stepgraph: error: checkpoint '[^']*' was saved from another setup:\n  model: sequential\\(.* in the checkpoint, .* here"
  REQUIRES cli_residual_run)

# Resuming from a checkpoint beyond the requested step count.
sg_cli_fail(cli_resume_beyond_total_steps
  ARGS train --steps 100 --resume "${SG_RUNS}/steps200/checkpoint.safetensors" --out "${SG_RUNS}/steps200"
  EXIT 1
  STDERR "^stepgraph: error: the checkpoint '[^']*' is at step 200, beyond the requested total of 100 steps"
  UNCHANGED "${SG_RUN200_FILES}"
  REQUIRES cli_run200)

# Physics-informed problems: a custom problem from expressions (heat equation with Fourier
# features) and a built-in one; the summary carries the relative L2 error, which must have
# fallen well below its starting value (about 1) within the short run.
sg_cli_ok(cli_pinn_custom_heat
  ARGS train "${SG_CONFIGS}/custom_heat.json" --steps 400 --json
  OUT "${SG_RUNS}/pinn_heat"
  KEYS "event|steps|final_loss|us_per_step|rel_l2_error"
  EQUAL "event=summary|steps=400|task=physics-informed"
  MAX "rel_l2_error=0.1"
  FILES "${SG_RUNS}/pinn_heat/checkpoint.safetensors|${SG_RUNS}/pinn_heat/metrics.jsonl"
  TIMEOUT 300)
sg_cli_ok(cli_pinn_poisson_builtin
  ARGS train "${SG_CONFIGS}/poisson2d.json" --steps 100 --json
  OUT "${SG_RUNS}/pinn_poisson"
  STDOUT "\"event\":\"progress\".*\"lr\":0\\.001"
  KEYS "event|steps|rel_l2_error"
  EQUAL "event=summary|steps=100|task=physics-informed"
  TIMEOUT 300)
# The built-in heat equation: after 300 steps its error is ~0.07 (from about 1).
sg_cli_ok(cli_pinn_heat1d_builtin
  ARGS train "${SG_CONFIGS}/heat1d.json" --steps 300 --json
  OUT "${SG_RUNS}/pinn_heat1d"
  KEYS "event|steps|rel_l2_error"
  EQUAL "event=summary|steps=300|task=physics-informed"
  MAX "rel_l2_error=0.2"
  TIMEOUT 300)
# An inverse problem: Burgers' viscosity learned from 2,000 observations of the exact solution
# (the GPU run that recovers it is in bench/RESULTS.md); the coefficient is reported by name.
sg_cli_ok(cli_pinn_burgers_inverse_reports_its_coefficient
  ARGS train "${SG_CONFIGS}/burgers_inverse.json" --steps 3 --device cpu --json
  OUT "${SG_RUNS}/pinn_burgers_inverse"
  KEYS "event|steps|rel_l2_error|coefficients|loss_terms"
  EQUAL "event=summary|steps=3|task=physics-informed"
  TIMEOUT 300)
sg_cli_ok(cli_pinn_burgers_inverse_progress_names_the_coefficient
  ARGS train "${SG_CONFIGS}/burgers_inverse.json" --steps 2 --device cpu
  OUT "${SG_RUNS}/burgers_inverse"
  STDOUT "step 2/2  loss [^ ]+  nu 0\\.0[0-9]+.*learned nu = 0\\.0"
  TIMEOUT 300)
# The boundary term's points ride in the residual's network pass: 256 value rows, then the jets.
sg_cli_ok(cli_explain_pinn_one_pass
  ARGS explain "${SG_CONFIGS}/poisson2d.json" --device cpu
  STDOUT "jet_input\\(u, u_0, u_1, u_00\\+u_11\\)\\(256 value-only rows first\\)  'jet residual': points.0\\[512, 2\\], points.1\\[256, 2\\] -> points.0.jet\\[2304, 2\\].*expression_loss\\(from row 256\\)  'loss residual'")
sg_cli_fail(cli_pinn_bad_expression
  ARGS train "${SG_DATA}/pinn_bad_expression.json"
  EXIT 1
  STDERR "problem\\.residual: unknown name 'uxx' at column 8")

# Data-parallel launch (docs/multi-gpu.md). Without GPUs only the launcher and the refusals
# are testable: one rank is a plain run; two CPU ranks fail, each saying why, and the launcher
# reports the failing rank (whichever fails first: the other may be stopped before it prints).
sg_cli_ok(cli_launch_one_rank_is_a_plain_run
  ARGS launch --gpus 1 train --steps 20 --device cpu --json
  OUT "${SG_RUNS}/launch1"
  KEYS "${SG_SUMMARY_KEYS}"
  EQUAL "event=summary|steps=20|device=cpu")
sg_cli_fail(cli_launch_two_cpu_ranks_fail_with_their_rank
  ARGS launch --gpus 2 train --steps 5 --device cpu
  STDERR "stepgraph: error: data-parallel training \\(rank [01] of 2, torchrun launch\\) runs on CUDA devices.*launch: failed: rank [01] \\(status 1\\) of 2"
  EXIT 1)
sg_cli_fail(cli_launch_needs_a_train_command
  ARGS launch --gpus 2 eval
  STDERR "expected the command to run, `train CONFIG \\[options\\]` or `bench CONFIG \\[options\\]`, got 'eval'"
  EXIT 2)
sg_cli_fail(cli_launch_needs_gpus
  ARGS launch train
  STDERR "--gpus is required")
sg_cli_fail(cli_distributed_nccl_refuses_the_cpu
  ARGS train "${SG_DATA}/distributed_nccl.json" --steps 5
  STDERR "data-parallel training \\(rank 0 of 1, single launch\\) runs on CUDA devices; the device asked for is cpu")

# bench-op conv's options (docs/cli.md): checked before any GPU is asked for, so
# these hold on any machine.
sg_cli_fail(cli_bench_op_conv_kernel_larger_than_padded_image
  ARGS bench-op conv --height 3 --width 3 --kernel 7
  EXIT 1
  STDERR "bench-op conv: the 7x7 kernel \\(--kernel 7\\) is larger than the padded 5x5 image \\(--height 3, --width 3, --pad 1\\): expected --kernel <= 5")
sg_cli_fail(cli_bench_op_conv_zero_channels
  ARGS bench-op conv --channels 0
  STDERR "--channels: expected an integer >= 1, got '0'")
sg_cli_fail(cli_bench_op_conv_negative_pad
  ARGS bench-op conv --pad -1
  STDERR "--pad: expected an integer >= 0, got '-1'")
sg_cli_fail(cli_bench_op_sdpa_refuses_conv_options
  ARGS bench-op sdpa --kernel 3
  EXIT 2
  STDERR "stepgraph bench-op sdpa: --kernel is an option of bench-op conv only")
sg_cli_fail(cli_bench_op_conv_refuses_sdpa_options
  ARGS bench-op conv --no-causal
  EXIT 2
  STDERR "stepgraph bench-op conv: --no-causal is an option of bench-op sdpa only")
