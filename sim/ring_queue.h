// sim/ring_queue.h — a FIFO on a power-of-two ring that grows by doubling and never
// shrinks, so a queue that has reached its working size allocates nothing more (unlike
// std::deque, which allocates and frees a block every few hundred bytes of traffic).
// Elements must be default-constructible and movable; popped slots hold moved-from
// values until reused. Threading: none (single-threaded, like the Sim).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace mroce::sim {

template <class T>
class RingQueue {
  public:
    bool empty() const { return size_ == 0; }
    size_t size() const { return size_; }
    T& front() { return slots_[head_]; }
    const T& front() const { return slots_[head_]; }

    void push_back(T value) {
        if (size_ == slots_.size()) grow();
        slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(value);
        ++size_;
    }
    // pop_front drops the front element (its slot is reset to T{} so resources go now).
    void pop_front() {
        slots_[head_] = T{};
        head_ = (head_ + 1) & (slots_.size() - 1);
        --size_;
    }

  private:
    void grow() {
        std::vector<T> bigger(slots_.empty() ? 16 : slots_.size() * 2);
        for (size_t i = 0; i < size_; ++i)
            bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
        slots_ = std::move(bigger);
        head_ = 0;
    }

    std::vector<T> slots_;  // size is 0 or a power of two
    size_t head_ = 0;
    size_t size_ = 0;
};

}  // namespace mroce::sim
