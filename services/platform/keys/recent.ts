/**
 * A map that forgets its least recently used keys past a size: what a process keeps of keys and what they
 * opened. Two generations approximate the order — a read in the older one moves the value to the newer,
 * and when the newer one is full the older is dropped whole — so a read costs a lookup, not the
 * delete-and-insert that keeps a single map in exact order (which left a large map rehashing).
 */
export class Recent<V> {
  private young = new Map<string, V>()
  private old = new Map<string, V>()
  private readonly generation: number
  private valuesLetGo = 0
  /** Holds at least `size / 2` and at most `size` of the most recently used keys. */
  constructor(size: number) {
    this.generation = Math.max(1, Math.ceil(size / 2))
  }
  get(key: string): V | undefined {
    const value = this.young.get(key)
    if (value !== undefined) return value
    const older = this.old.get(key)
    if (older !== undefined) {
      this.old.delete(key)
      this.insert(key, older)
    }
    return older
  }
  /** The value without counting it as used. */
  peek(key: string): V | undefined {
    return this.young.get(key) ?? this.old.get(key)
  }
  delete(key: string) {
    const young = this.young.delete(key)
    const old = this.old.delete(key)
    if (young || old) this.valuesLetGo++
  }
  get count() {
    return this.young.size + this.old.size
  }
  /**
   * How many times it let go of a value: a key deleted, its value replaced by another, or older keys let go
   * for room. While this is unchanged, every value read from it before is still held, and still the key's.
   */
  get changes() {
    return this.valuesLetGo
  }
  set(key: string, value: V) {
    const before = this.peek(key)
    if (before !== undefined && before !== value) this.valuesLetGo++
    this.old.delete(key)
    if (this.young.has(key)) this.young.set(key, value)
    else this.insert(key, value)
  }
  deleteWhere(match: (key: string) => boolean) {
    for (const map of [this.young, this.old])
      for (const key of [...map.keys()])
        if (match(key)) {
          map.delete(key)
          this.valuesLetGo++
        }
  }
  private insert(key: string, value: V) {
    if (this.young.size >= this.generation) {
      if (this.old.size > 0) this.valuesLetGo++
      this.old = this.young
      this.young = new Map()
    }
    this.young.set(key, value)
  }
}
