# The torch-free half of the engine (embedlab_formats): file parsers and checks,
# tokenizers, manifest layouts, accounting, job files, experiment requests and
# results files. engine/CMakeLists.txt builds it as a library; fuzz/CMakeLists.txt
# builds the same list with libFuzzer's instrumentation.
set(EMBEDLAB_FORMATS_SOURCES
  io/safetensors_header.cpp io/gguf_parser.cpp io/gguf_output.cpp io/gguf_quants.cpp io/ggml_quantize.cpp io/llama2c_header.cpp
  io/hf_config.cpp io/model_config.cpp io/mapped_file.cpp io/file_input.cpp io/output_checks.cpp
  io/llamacpp_logits.cpp
  model/manifest_layout.cpp
  methods/accounting.cpp methods/fourier_mlp.cpp methods/method_registry.cpp
  methods/quant_types.cpp methods/stored_forms.cpp methods/trim_fields.cpp
  job/job_check.cpp job/experiment_request.cpp job/results.cpp job/pipeline_request.cpp
  remote/worker_events.cpp)
list(TRANSFORM EMBEDLAB_FORMATS_SOURCES PREPEND ${CMAKE_CURRENT_LIST_DIR}/src/)
# Every method family's registry rows and stored forms (request_<family>.cpp): a new
# method's file joins with no edit here.
file(GLOB EMBEDLAB_METHOD_ROW_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/src/methods/request_*.cpp)
list(APPEND EMBEDLAB_FORMATS_SOURCES ${EMBEDLAB_METHOD_ROW_SOURCES})
# Every tokenizer.
file(GLOB EMBEDLAB_TOKENIZER_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/src/tokenizer/*.cpp)
list(APPEND EMBEDLAB_FORMATS_SOURCES ${EMBEDLAB_TOKENIZER_SOURCES})
