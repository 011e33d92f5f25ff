// verbs/memory.cc — protection domains and memory regions.
#include <cerrno>
#include <new>

#include "verbs/verbs_internal.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

using namespace mroce;
using namespace mroce::verbs;

namespace {

// Access bits the engine enforces; IBV_ACCESS_LOCAL_WRITE is accepted as verbs requires it
// for remote write and atomics (the engine checks the local side at post time).
constexpr unsigned kEnforced = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                               IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
// Hints with no meaning here: ordinary memory needs no huge-page mapping, and the optional
// range (relaxed ordering, ...) may be ignored by definition.
constexpr unsigned kIgnored = unsigned{IBV_ACCESS_HUGETLB} | unsigned{IBV_ACCESS_OPTIONAL_RANGE};

ibv_mr* register_mr(ibv_pd* ibpd, void* addr, size_t length, uint64_t iova, unsigned access) {
    if (!ibpd || (!addr && length > 0)) {
        errno = EINVAL;
        return nullptr;
    }
    if (access & ~(kEnforced | kIgnored)) {
        log(1, "ibv_reg_mr: access flags 0x%x not supported (on-demand paging, zero-based "
               "and memory-window regions are not)", access & ~(kEnforced | kIgnored));
        errno = EOPNOTSUPP;
        return nullptr;
    }
    // Verbs requires local write with remote write or atomics ([IBTA] o10-36.2.1-1).
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
        !(access & IBV_ACCESS_LOCAL_WRITE)) {
        errno = EINVAL;
        return nullptr;
    }
    if (iova != reinterpret_cast<uintptr_t>(addr)) {
        log(1, "ibv_reg_mr_iova: an I/O virtual address other than the buffer's own is not "
               "supported");
        errno = EOPNOTSUPP;
        return nullptr;
    }
    Pd* pd = outer<Pd>(ibpd);
    auto r = pd->pd->register_memory(addr, length, access & kEnforced);
    if (!r) {
        errno = errno_of(r.error());
        return nullptr;
    }
    auto* mr = new (std::nothrow) Mr{};
    if (!mr) {
        errno = ENOMEM;
        return nullptr;
    }
    mr->mr = std::move(r).value();
    mr->ibv.context = ibpd->context;
    mr->ibv.pd = ibpd;
    mr->ibv.addr = addr;
    mr->ibv.length = length;
    mr->ibv.handle = mr->mr->lkey();
    mr->ibv.lkey = mr->mr->lkey();
    mr->ibv.rkey = mr->mr->rkey();
    return &mr->ibv;
}

}  // namespace

extern "C" {

ibv_pd* ibv_alloc_pd(ibv_context* context) {
    if (!context) {
        errno = EINVAL;
        return nullptr;
    }
    Context* ctx = context_of(context);
    auto* pd = new (std::nothrow) Pd{};
    if (!pd) {
        errno = ENOMEM;
        return nullptr;
    }
    pd->dev = ctx->dev;
    pd->pd = ctx->dev->alloc_pd();
    pd->ibv.context = context;
    pd->ibv.handle = pd->pd->id();
    return &pd->ibv;
}

int ibv_dealloc_pd(ibv_pd* ibpd) {
    if (!ibpd) return EINVAL;
    delete outer<Pd>(ibpd);
    return 0;
}

ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
    return register_mr(pd, addr, length, reinterpret_cast<uintptr_t>(addr),
                       static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
    return register_mr(pd, addr, length, iova, static_cast<unsigned>(access));
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
    return register_mr(pd, addr, length, iova, access);
}

int ibv_dereg_mr(ibv_mr* ibmr) {
    if (!ibmr) return EINVAL;
    delete outer<Mr>(ibmr);  // ends every peer's access before it returns
    return 0;
}

}  // extern "C"
