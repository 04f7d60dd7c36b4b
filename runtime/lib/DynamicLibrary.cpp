//===- DynamicLibrary.cpp - dlopen and symbol tables for GPU APIs ---------===//

#include "DynamicLibrary.h"

#include <dlfcn.h>

using namespace mla::rt;

const char *dylib::resolveSymbols(void *handle, const Symbol *table,
                                  size_t size) {
  for (size_t i = 0; i < size; ++i) {
    const Symbol &symbol = table[i];
    void *address = dlsym(handle, symbol.name);
    if (!address && symbol.fallback)
      address = dlsym(handle, symbol.fallback);
    if (!address && symbol.required)
      return symbol.name;
    *symbol.slot = address;
  }
  return nullptr;
}

void *dylib::openLibrary(const std::string &path, std::string &why) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    why = reason ? reason : "unknown dlopen error";
  }
  return handle;
}

bool dylib::isNotFound(const std::string &why, bool orCannotOpen) {
  return why.find("No such file") != std::string::npos ||
         (orCannotOpen &&
          why.find("cannot open shared object") != std::string::npos);
}

void dylib::closeLibrary(void *handle) { dlclose(handle); }

void dylib::flattenLines(std::string &text) {
  for (char &c : text)
    if (c == '\n' || c == '\r')
      c = ' ';
}
