# The installed CMake package: `cmake --install` puts the layer libraries, the headers and
# lib/cmake/tandem/{tandemConfig,tandemConfigVersion,tandemTargets}.cmake under the prefix, so a
# user's project does find_package(tandem) and links tandem::tandem (or one layer, tandem::nn).
# tandem_add_layer registers each layer's install rule; tandem_install_package() writes the rest.
include(CMakePackageConfigHelpers)

# Packages whose targets may appear in the exported link interfaces (a static library carries its
# PRIVATE deps as $<LINK_ONLY:...>, so the user's link needs them too), with their minimum
# versions. A target Ns::x is matched to the package named Ns, ignoring case (DNNL::dnnl -> dnnl).
set(TANDEM_KNOWN_PACKAGES dnnl OpenMP Threads ZLIB nlohmann_json tomlplusplus)
set(TANDEM_PACKAGE_VERSION_nlohmann_json 3.10)
set(TANDEM_PACKAGE_VERSION_tomlplusplus 3)

# Appends to `out` the packages (from TANDEM_KNOWN_PACKAGES) that `target`'s link interface names;
# an imported target from any other package stops the configure, so the installed package can
# never miss a dependency a new layer brings in.
function(_tandem_link_packages target out)
  get_target_property(type ${target} TYPE)
  get_target_property(items ${target} INTERFACE_LINK_LIBRARIES)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    get_target_property(link_items ${target} LINK_LIBRARIES)  # PRIVATE deps of a static library
    if(link_items)
      list(APPEND items ${link_items})
    endif()
  endif()
  set(found ${${out}})
  foreach(item IN LISTS items)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item MATCHES "^tandem(::|_)" OR NOT item MATCHES "^([A-Za-z0-9_.+-]+)::")
      continue()  # another tandem layer, or not a namespaced target
    endif()
    string(TOLOWER "${CMAKE_MATCH_1}" ns)
    set(package "")
    foreach(known IN LISTS TANDEM_KNOWN_PACKAGES)
      string(TOLOWER "${known}" lower)
      if(lower STREQUAL ns)
        set(package ${known})
      endif()
    endforeach()
    if(NOT package)
      message(FATAL_ERROR "${target} links ${item}, whose package the installed tandemConfig.cmake "
                          "would not find: add it to TANDEM_KNOWN_PACKAGES in ${CMAKE_CURRENT_FUNCTION_LIST_FILE}")
    endif()
    list(APPEND found ${package})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# Call once, after every layer and the tandem target exist.
function(tandem_install_package)
  set(config_dir ${CMAKE_INSTALL_LIBDIR}/cmake/tandem)
  get_property(layers GLOBAL PROPERTY TANDEM_LAYERS)

  set(packages "")
  foreach(layer IN LISTS layers)
    _tandem_link_packages(tandem_${layer} packages)
  endforeach()
  _tandem_link_packages(tandem packages)
  set(TANDEM_FIND_DEPENDENCIES "")
  foreach(known IN LISTS TANDEM_KNOWN_PACKAGES)  # in the table's order, each once
    if(known IN_LIST packages)
      string(STRIP "find_dependency(${known} ${TANDEM_PACKAGE_VERSION_${known}}" line)
      string(APPEND TANDEM_FIND_DEPENDENCIES "${line})\n")
    endif()
  endforeach()
  set(TANDEM_LAYER_NAMES "${layers}")

  install(EXPORT tandemTargets NAMESPACE tandem:: FILE tandemTargets.cmake
          DESTINATION ${config_dir})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tandemConfig.cmake.in
                                ${PROJECT_BINARY_DIR}/tandemConfig.cmake
                                INSTALL_DESTINATION ${config_dir})
  # 0.x: a minor version may break the API, so only the same minor version is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
                                   VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/tandemConfig.cmake
                ${PROJECT_BINARY_DIR}/tandemConfigVersion.cmake
          DESTINATION ${config_dir})
endfunction()
