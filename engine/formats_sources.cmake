# The torch-free half of the engine (embedlab_formats): file parsers and checks,
# tokenizers, manifest layouts, accounting, job files, experiment requests and
# results files. engine/CMakeLists.txt builds it as a library; fuzz/CMakeLists.txt
# builds the same list with libFuzzer's instrumentation.
file(GLOB EMBEDLAB_TOKENIZER_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/src/tokenizer/*.cpp)
set(EMBEDLAB_FORMATS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/src/io/safetensors_header.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/gguf_parser.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/gguf_output.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/gguf_quants.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/llama2c_header.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/hf_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/model_config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/mapped_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/io/file_input.cpp
  ${EMBEDLAB_TOKENIZER_SOURCES}
  ${CMAKE_CURRENT_LIST_DIR}/src/model/manifest_layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/methods/accounting.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/methods/fourier_mlp.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/job/job_check.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/job/experiment_request.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/job/results.cpp
  ${CMAKE_CURRENT_LIST_DIR}/src/remote/worker_events.cpp)
