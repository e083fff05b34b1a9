# Hostile input end to end (included from tests/CMakeLists.txt after cli_tests.cmake): every
# input of the hostile-input issue ends in exit 1 and one clear message within seconds, on an
# 8 GiB machine (MEMORY_8G), and leaves no output folder behind (ABSENT). make_inputs.py writes
# the inputs (the large ones are generated, not committed).

find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "stepgraph: no python3; the hostile-input CLI tests are not registered")
  return()
endif()

set(SG_HOSTILE "${CMAKE_BINARY_DIR}/hostile")
add_test(NAME hostile_make_inputs
         COMMAND ${Python3_EXECUTABLE} "${CMAKE_CURRENT_LIST_DIR}/make_inputs.py" "${SG_HOSTILE}")
set_tests_properties(hostile_make_inputs PROPERTIES FIXTURES_SETUP hostile_inputs TIMEOUT 120 LABELS cli)

# sg_hostile(<name> <config in SG_HOSTILE> <stderr regex> [MEMORY_8G]): train must fail cleanly.
# A sanitizer build reserves terabytes of address space, so `ulimit -v` cannot stand for a small
# machine there: the MEMORY_8G cases run in the plain build only.
function(sg_hostile name config regex)
  set(out "${SG_RUNS}/hostile_${name}")
  set(extra ${ARGN})
  if(STEPGRAPH_SANITIZE AND "MEMORY_8G" IN_LIST extra)
    return()
  endif()
  sg_cli_fail(hostile_${name}
    ARGS train "${SG_HOSTILE}/${config}" --device cpu --out "${out}"
    EXIT 1
    STDERR "^stepgraph: error: ${regex}"
    ABSENT "${out}"
    REQUIRES hostile_inputs
    ${extra})
endfunction()

# 1. Crashes
sg_hostile(deep_objects deep_objects.json
  "config '[^']*deep_objects\\.json': line 1, column 389 \\(model\\.a\\.a[.a]*\\.\\.\\.[.a]*\\): nested more than 64 levels deep")
sg_hostile(deep_arrays deep_arrays.json
  "config '[^']*deep_arrays\\.json': line 1, column 74 \\(model[][0.]*\\): nested more than 64 levels deep")
sg_hostile(conv_2p62 conv_2p62.json
  "tensor '0\\.weight' of shape \\[16777216, 4096, 4096, 16384\\] \\(f32\\) has more bytes than a 64-bit size can count")

# 2. Memory
sg_hostile(dense_2p24 dense_2p24.json
  "cpu backend: the step plan needs 1[0-9]\\.[0-9] GiB of host memory, but this machine has [0-9.]+ [KMG]iB available"
  MEMORY_8G)
sg_hostile(inflates_6g inflates_6g.json
  "npz file '[^']*inflates_6g\\.npz' \\(2 arrays, inflated and converted\\) needs 12\\.1 GiB of host memory, but this machine has [0-9.]+ [KMG]iB available"
  MEMORY_8G)
sg_hostile(shared_member shared_member.json
  "npz file '[^']*shared_member\\.npz': members 'X\\.npy' and 'alias0\\.npy' share their bytes \\(from offset 0\\)")

# 3. Hangs
sg_hostile(layers_6m layers_6m.json "config '[^']*layers_6m\\.json' is 172\\.5 MiB; at most 64\\.0 MiB of JSON are accepted")
sg_hostile(layers_80k layers_80k.json "config '[^']*layers_80k\\.json': model\\.layers: 80001 layers; at most 65536 are supported")
# 20k layers build, plan and train in seconds (it took 155 s when model building was quadratic).
sg_cli_ok(hostile_layers_20k_trains
  ARGS train "${SG_HOSTILE}/layers_20k.json" --device cpu --steps 2 --json
  OUT "${SG_RUNS}/hostile_layers_20k"
  EQUAL "event=summary|steps=2"
  TIMEOUT 60)
set_tests_properties(hostile_layers_20k_trains PROPERTIES FIXTURES_REQUIRED hostile_inputs)

# 5. Silently wrong data
sg_hostile(nan_first_row nan_first_row.json
  "CSV file '[^']*nan_first_row\\.csv' line 1, column 1: cell 'nan' is not a finite number")
sg_hostile(duplicate_steps duplicate_steps.json
  "config '[^']*duplicate_steps\\.json': line 1, column [0-9]+ \\(train\\.steps\\): the key 'steps' appears more than once \\(first at line 1, column [0-9]+\\)")
sg_hostile(duplicate_model duplicate_model.json
  "config '[^']*duplicate_model\\.json': line 1, column [0-9]+ \\(model\\): the key 'model' appears more than once \\(first at line 1, column 2\\)")

# 7. Unclear messages
sg_hostile(number_1e400 number_1e400.json
  "config '[^']*number_1e400\\.json': line 1, column [0-9]+ \\(train\\.seed\\): the number 1e400 is out of range")
sg_hostile(data_is_directory data_is_directory.json "cannot read CSV file '[^']*': it is a directory, not a file")

# 5. A checkpoint of a relu model does not load into a tanh model, nor AdamW state into Adam with
# another learning rate; --weights-only takes the parameters on purpose.
set(SG_RELU_RUN "${SG_RUNS}/hostile_relu")
sg_cli_ok(hostile_relu_run
  ARGS train --device cpu --steps 5
  OUT "${SG_RELU_RUN}"
  FILES "${SG_RELU_RUN}/checkpoint.safetensors"
  SETUP hostile_relu_run)
sg_cli_fail(hostile_relu_checkpoint_into_tanh
  ARGS train "${SG_HOSTILE}/digits_tanh.json" --resume "${SG_RELU_RUN}/checkpoint.safetensors" --out "${SG_RELU_RUN}"
  EXIT 1
  STDERR "^stepgraph: error: checkpoint '[^']*' was saved from another setup:\n  model: dense\\(256, relu, init=he, bias\\) in the checkpoint, dense\\(256, tanh, init=xavier, bias\\) here \\(item 0 of sequential\\(\\.\\.\\.\\)\\)\n.*--weights-only"
  UNCHANGED "${SG_RELU_RUN}/checkpoint.safetensors|${SG_RELU_RUN}/metrics.jsonl|${SG_RELU_RUN}/config.json"
  REQUIRES hostile_relu_run hostile_inputs)
sg_cli_ok(hostile_relu_weights_into_tanh
  ARGS train "${SG_HOSTILE}/digits_tanh.json" --resume "${SG_RELU_RUN}/checkpoint.safetensors" --weights-only --json
  OUT "${SG_RUNS}/hostile_tanh_from_relu"
  EQUAL "event=summary|steps=5")
set_tests_properties(hostile_relu_weights_into_tanh PROPERTIES FIXTURES_REQUIRED "hostile_relu_run;hostile_inputs")

set(SG_ADAMW_RUN "${SG_RUNS}/hostile_adamw")
sg_cli_ok(hostile_adamw_run
  ARGS train "${SG_HOSTILE}/digits_adamw.json"
  OUT "${SG_ADAMW_RUN}"
  SETUP hostile_adamw_run)
set_tests_properties(hostile_adamw_run PROPERTIES FIXTURES_REQUIRED hostile_inputs)
sg_cli_fail(hostile_adamw_checkpoint_into_adam
  ARGS train "${SG_HOSTILE}/digits_adam.json" --steps 10 --resume "${SG_ADAMW_RUN}/checkpoint.safetensors"
       --out "${SG_ADAMW_RUN}"
  EXIT 1
  STDERR "^stepgraph: error: checkpoint '[^']*' was saved from another setup:\n  optimizer: adamw\\(lr=0\\.001.* in the checkpoint, adam\\(lr=0\\.01.* here"
  UNCHANGED "${SG_ADAMW_RUN}/checkpoint.safetensors|${SG_ADAMW_RUN}/metrics.jsonl|${SG_ADAMW_RUN}/config.json"
  REQUIRES hostile_adamw_run)

# 4. A run into a folder that holds another run is refused; a divergence names the last checkpoint.
sg_cli_fail(hostile_second_run_into_a_run_folder
  ARGS train --device cpu --steps 5 --out "${SG_RELU_RUN}"
  EXIT 1
  STDERR "^stepgraph: error: output folder '[^']*hostile_relu' holds an earlier run \\(config\\.json, metrics\\.jsonl, checkpoint\\.safetensors\\); continue it with --resume [^ ]*checkpoint\\.safetensors, replace it with --overwrite"
  UNCHANGED "${SG_RELU_RUN}/checkpoint.safetensors|${SG_RELU_RUN}/metrics.jsonl|${SG_RELU_RUN}/config.json"
  REQUIRES hostile_relu_run)
sg_cli_fail(hostile_divergence_names_the_last_checkpoint
  ARGS train "${SG_HOSTILE}/diverges.json" --out "${SG_RUNS}/hostile_diverges" --overwrite
  EXIT 1
  STDERR "^stepgraph: error: the loss or gradient norm became NaN or inf at step ([2-9]|1[0-9])( \\(seen at step [0-9]+\\))?: training diverged \\(try a smaller learning rate or optimizer\\.clip_norm; train\\.on_nan \"skip\" leaves such steps out\\); the last checkpoint, '[^']*hostile_diverges/checkpoint\\.safetensors', is from step [1-9]"
  REQUIRES hostile_inputs)
