# Building GPU backend plugins (libcandle_<kind>.so), the shared libraries that src/core/device.cpp
# opens with dlopen on first use of Device::<kind>(i). Used by src/vulkan/CMakeLists.txt, and meant
# for src/cuda and src/rocm. Only the build uses this file: it is not installed, since a consumer of
# the installed package links candle::core (and candle::<kind> for a backend's own API) but never
# builds a backend against the installed core.
include_guard(GLOBAL)

set(CANDLE_BACKEND_PLUGIN_EXPORTS_MAP ${CMAKE_CURRENT_LIST_DIR}/backend_plugin_exports.map)

# candle_add_backend_plugin(NAME <kind>
#                           SOURCES <file>...
#                           [GENERATED <file>...]
#                           [INCLUDE_DIRS <dir>...]
#                           [DEFINITIONS <def>...]
#                           [LIBS <lib>...]
#                           [VERSION_SCRIPT <file>])
#
# Adds the shared library target candle_<kind> (alias candle::<kind>, file libcandle_<kind>.so in
# the build's lib/ folder beside libcandle_core.so, where the core looks for it), and:
#  - compiles SOURCES and GENERATED with the source tree's src/ and the calling directory on the
#    include path (an in-tree backend shares the CPU's internals, e.g. cpu/random.h), plus
#    INCLUDE_DIRS (a vendor SDK's headers) and DEFINITIONS, all private;
#  - GENERATED lists the outputs of add_custom_command() in the calling directory that the plugin
#    compiles or embeds: the SPIR-V byte arrays of the Vulkan kernels; for CUDA the .cpp that embeds
#    the nvcc fatbin (sm_80/86/89/90 + PTX) of kernels/cuda; for ROCm the HIP code objects that
#    hipcc builds from the same kernels/cuda sources. Listing them makes the build run those
#    commands before the plugin's sources compile;
#  - links candle::core publicly and LIBS privately (e.g. CUDA::cudart, cuBLAS; Vulkan links no
#    vendor library, as libvulkan is loaded at run time), with -Wl,--no-undefined so that a missing
#    symbol fails the build rather than the dlopen (CANDLE_LINK_NO_UNDEFINED: not under clang's
#    sanitizers, whose runtime only the executables link);
#  - exports only what VERSION_SCRIPT lists (default: cmake/backend_plugin_exports.map: the plugin
#    entry points of candle/backend/plugin.h and candle::*), keeping a vendor SDK's symbols private;
#  - installs it beside libcandle_core.so, in the candleTargets export set (candle::<kind>);
#  - appends it to the global property CANDLE_BACKEND_PLUGINS, which
#    candle_depend_on_backend_plugins() turns into build dependencies of the programs and tests.
#
# The plugin's sources must define the three entry points of candle/backend/plugin.h (see there)
# and must not register anything from a static initialiser.
function(candle_add_backend_plugin)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "NAME;VERSION_SCRIPT" "SOURCES;GENERATED;INCLUDE_DIRS;DEFINITIONS;LIBS")
  if(NOT ARG_NAME OR NOT ARG_SOURCES)
    message(FATAL_ERROR "candle_add_backend_plugin: NAME and SOURCES are required")
  endif()
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "candle_add_backend_plugin: unknown arguments ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_VERSION_SCRIPT)
    set(ARG_VERSION_SCRIPT ${CANDLE_BACKEND_PLUGIN_EXPORTS_MAP})
  endif()
  set(target candle_${ARG_NAME})
  if(ARG_GENERATED)
    set_source_files_properties(${ARG_GENERATED} PROPERTIES GENERATED TRUE)
  endif()
  add_library(${target} SHARED ${ARG_SOURCES} ${ARG_GENERATED})
  add_library(candle::${ARG_NAME} ALIAS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${target} EXPORT_NAME ${ARG_NAME}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_LIBRARY_OUTPUT_DIRECTORY})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}
    ${ARG_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE ${ARG_DEFINITIONS})
  target_link_libraries(${target} PUBLIC candle_core PRIVATE ${CMAKE_DL_LIBS} ${ARG_LIBS})
  target_link_options(${target} PRIVATE -Wl,--version-script=${ARG_VERSION_SCRIPT} ${CANDLE_LINK_NO_UNDEFINED})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${ARG_VERSION_SCRIPT})
  install(TARGETS ${target} EXPORT candleTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  set_property(GLOBAL APPEND PROPERTY CANDLE_BACKEND_PLUGINS ${target})
endfunction()

# candle_depend_on_backend_plugins(DIRECTORIES <source dir>...)
#
# Makes every executable defined in those directories (and their subdirectories) depend on every
# plugin added so far: the programs load plugins with dlopen and never link them, so without this
# `cmake --build --target candle-upscale` would leave libcandle_vulkan.so unbuilt and
# `--device vulkan` would fail to load it. Call it after the plugins and the programs are defined;
# a directory that was not added (CANDLE_BUILD_EXAMPLES=OFF, ...) is skipped. Only directories of
# programs: a tool that a plugin's build runs must not be listed (a dependency cycle).
function(candle_depend_on_backend_plugins)
  cmake_parse_arguments(PARSE_ARGV 0 ARG "" "" "DIRECTORIES")
  get_property(plugins GLOBAL PROPERTY CANDLE_BACKEND_PLUGINS)
  if(NOT plugins)
    return()
  endif()
  get_property(added DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
  set(dirs)
  foreach(dir ${ARG_DIRECTORIES})
    get_filename_component(dir ${dir} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    if(dir IN_LIST added)
      list(APPEND dirs ${dir})
    endif()
  endforeach()
  while(dirs)
    list(POP_FRONT dirs dir)
    get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND dirs ${subdirs})
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(t ${targets})
      get_target_property(type ${t} TYPE)
      if(type STREQUAL "EXECUTABLE")
        add_dependencies(${t} ${plugins})
      endif()
    endforeach()
  endwhile()
endfunction()

# candle_write_backend_plugin_list(<file>)
#
# Writes the plugins' file names (libcandle_<kind>.so), one a line, to <file> at generate time:
# tools/install-check.sh checks that each of them is installed beside libcandle_core.so.
function(candle_write_backend_plugin_list file)
  get_property(plugins GLOBAL PROPERTY CANDLE_BACKEND_PLUGINS)
  set(names)
  foreach(p ${plugins})
    list(APPEND names "$<TARGET_LINKER_FILE_NAME:${p}>")
  endforeach()
  list(JOIN names "\n" content)
  file(GENERATE OUTPUT ${file} CONTENT "${content}\n")
endfunction()
