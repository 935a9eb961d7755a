#include "kernels/meta/meta_fallback.h"

#include <sys/mman.h>

#include "core/error.h"

namespace ember {

namespace {
// Zero-filled host memory that costs no resident memory until written.
struct ZeroPages {
  void* ptr;
  size_t len;
};

void free_zero_pages(void* ctx) {
  auto* z = static_cast<ZeroPages*>(ctx);
  if (z->len) munmap(z->ptr, z->len);
  delete z;
}

DataPtr zero_pages(size_t nbytes) {
  static char empty_buf[64] alignas(64) = {};
  if (nbytes == 0) return DataPtr(empty_buf, nullptr, nullptr, cpu_device());
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EMBER_CHECK(p != MAP_FAILED, "meta: could not reserve ", nbytes,
              " bytes of address space for a stand-in tensor");
  auto* z = new ZeroPages{p, nbytes};
  return DataPtr(p, z, &free_zero_pages, cpu_device());
}
}  // namespace

Storage MetaFallback::standin_storage(const Storage& meta) {
  for (auto& [m, c] : storages_)
    if (m == meta) return c;
  Storage c = std::make_shared<StorageImpl>(zero_pages(meta->nbytes), meta->nbytes);
  storages_.emplace_back(meta, c);
  return c;
}

Storage MetaFallback::meta_storage(const Storage& cpu) {
  for (auto& [m, c] : storages_)
    if (c == cpu) return m;
  return nullptr;
}

Tensor MetaFallback::in(const Tensor& t) {
  if (!t || t->device().type != DeviceType::Meta) return t;
  for (const Pair& p : pairs_)
    if (p.meta == t) return p.cpu;
  Tensor c = std::make_shared<TensorImpl>(standin_storage(t->storage()), t->dtype(), t->sizes(),
                                          t->strides(), t->storage_offset(),
                                          std::make_shared<VersionCounter>());
  pairs_.push_back({t, c, 0});
  return c;
}

TensorOrScalar MetaFallback::in(const TensorOrScalar& v) {
  if (!v.is_tensor()) return v;
  return TensorOrScalar(in(v.tensor));
}

std::vector<Tensor> MetaFallback::in(const std::vector<Tensor>& ts) {
  std::vector<Tensor> r;
  r.reserve(ts.size());
  for (const Tensor& t : ts) r.push_back(in(t));
  return r;
}

void MetaFallback::sync_inputs() {
  for (Pair& p : pairs_) {
    const Tensor& m = p.meta;
    const Tensor& c = p.cpu;
    if (c->storage() != standin_storage(m->storage())) {
      // An out= tensor the kernel resized onto new memory: give it new meta memory.
      Storage ms = meta_storage(c->storage());
      if (!ms) {
        ms = std::make_shared<StorageImpl>(device_allocator(DeviceType::Meta)->allocate(0),
                                           c->storage()->nbytes);
        storages_.emplace_back(ms, c->storage());
      }
      m->set_storage(ms);
    }
    if (c->sizes() != m->sizes() || c->strides() != m->strides() ||
        c->storage_offset() != m->storage_offset())
      m->set_sizes_strides(c->sizes(), c->strides(), c->storage_offset());
    if (c->dtype() != m->dtype()) m->set_dtype(c->dtype());
    for (int64_t v = p.version0; v < c->version(); ++v) m->bump_version();
    p.version0 = c->version();
  }
}

Tensor MetaFallback::out(const Tensor& r) {
  if (!r) return r;
  EMBER_CHECK(r->device().is_cpu(), op_, ": meta fallback got a result on ", r->device().str());
  for (const Pair& p : pairs_)
    if (p.cpu == r) return p.meta;
  if (Storage ms = meta_storage(r->storage())) {
    // A view of an argument (or of another result): same meta storage.
    for (const Pair& p : pairs_)
      if (p.meta->storage() == ms)
        return make_view(p.meta, r->sizes(), r->strides(), r->storage_offset(), r->dtype());
    return std::make_shared<TensorImpl>(ms, r->dtype(), r->sizes(), r->strides(),
                                        r->storage_offset(), std::make_shared<VersionCounter>());
  }
  Storage ms = std::make_shared<StorageImpl>(device_allocator(DeviceType::Meta)->allocate(0),
                                             r->storage()->nbytes);
  storages_.emplace_back(ms, r->storage());
  return std::make_shared<TensorImpl>(ms, r->dtype(), r->sizes(), r->strides(), r->storage_offset(),
                                      std::make_shared<VersionCounter>());
}

std::vector<Tensor> MetaFallback::out(const std::vector<Tensor>& rs) {
  std::vector<Tensor> r;
  r.reserve(rs.size());
  for (const Tensor& t : rs) r.push_back(out(t));
  return r;
}

}  // namespace ember
