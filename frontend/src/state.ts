// State shared between views: the series picked for export.

type Listener = () => void;

class Selection {
  private ids: string[] = [];
  private listeners: Listener[] = [];

  list(): string[] {
    return [...this.ids];
  }
  has(id: string): boolean {
    return this.ids.includes(id);
  }
  add(id: string): void {
    if (!this.has(id)) {
      this.ids.push(id);
      this.emit();
    }
  }
  remove(id: string): void {
    this.ids = this.ids.filter((x) => x !== id);
    this.emit();
  }
  clear(): void {
    this.ids = [];
    this.emit();
  }
  onChange(fn: Listener): void {
    this.listeners.push(fn);
  }
  private emit(): void {
    for (const fn of this.listeners) fn();
  }
}

export const exportSelection = new Selection();
