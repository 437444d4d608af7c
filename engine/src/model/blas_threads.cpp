#include "model/blas_threads.hpp"

#include <dlfcn.h>

namespace embedlab::detail {

namespace {

// Looked up at run time: the BLAS libtorch loaded may not be OpenBLAS (the Pi's build).
struct OpenBlasControls {
    void (*set)(int) = nullptr;
    int (*get)() = nullptr;
};

const OpenBlasControls& controls()
{
    static const OpenBlasControls c = [] {
        OpenBlasControls found;
        found.set = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
        found.get = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
        return found;
    }();
    return c;
}

} // namespace

OpenBlasThreads::OpenBlasThreads(int threads)
{
    const auto& c = controls();
    if (!c.set || !c.get)
        return;
    previous_ = c.get();
    if (previous_ != threads)
        c.set(threads);
    else
        previous_ = 0;
}

OpenBlasThreads::~OpenBlasThreads()
{
    if (previous_ > 0)
        controls().set(previous_);
}

} // namespace embedlab::detail
