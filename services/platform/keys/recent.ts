/** A map that forgets its least recently used keys past a size: what a process keeps of keys and what they opened. */
export class Recent<V> {
  private readonly map = new Map<string, V>()
  private readonly size: number
  constructor(size: number) {
    this.size = size
  }
  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined) {
      this.map.delete(key)
      this.map.set(key, value)
    }
    return value
  }
  /** The value without counting it as used. */
  peek(key: string): V | undefined {
    return this.map.get(key)
  }
  delete(key: string) {
    this.map.delete(key)
  }
  get count() {
    return this.map.size
  }
  set(key: string, value: V) {
    this.map.delete(key)
    this.map.set(key, value)
    if (this.map.size > this.size) this.map.delete(this.map.keys().next().value as string)
  }
  deleteWhere(match: (key: string) => boolean) {
    for (const key of [...this.map.keys()]) if (match(key)) this.map.delete(key)
  }
}
