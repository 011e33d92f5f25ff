#include "wire/header.h"

#include "wire/codec_internal.h"

namespace mroce::wire {

Result<CommonHeader> decode_common_header(std::span<const std::byte> datagram) {
    CommonHeader h;
    if (Error e = parse_common_header(datagram, h); e != Error::kOk) return e;
    return h;
}

}  // namespace mroce::wire
