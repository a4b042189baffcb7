# Warning flags shared by every tandem target; TANDEM_WERROR turns them into errors (CI does).
function(tandem_set_warnings target)
  # C++ only: nvcc takes its own flags (the host compiler's warnings pass through -Xcompiler).
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                              -Wno-missing-field-initializers>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(TANDEM_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                             $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
  if(TANDEM_NATIVE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-march=native>)
  endif()
endfunction()

# tandem_add_layer(NAME SOURCES... DEPS ...): one static library per layer, as in DESIGN.md.
function(tandem_add_layer name)
  cmake_parse_arguments(L "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(tandem_${name} STATIC ${L_SOURCES})
  add_library(tandem::${name} ALIAS tandem_${name})
  target_include_directories(tandem_${name} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_link_libraries(tandem_${name} PUBLIC ${L_DEPS} PRIVATE ${L_PRIVATE_DEPS})
  # The headers need C++20; say so in the usage requirements so installed-package users get it.
  target_compile_features(tandem_${name} PUBLIC cxx_std_20)
  tandem_set_warnings(tandem_${name})
  # Installed and exported as tandem::${name}, the same name as the in-tree alias
  # (cmake/TandemInstall.cmake writes the package; the headers install from src/tandem).
  set_target_properties(tandem_${name} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS tandem_${name} EXPORT tandemTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY TANDEM_LAYERS ${name})
endfunction()
