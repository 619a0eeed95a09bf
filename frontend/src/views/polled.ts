import { h } from '../util';

// PolledView is a view that asks the Go side again every `every` ms while
// it shows (Status, Sync); events redraw it in between.
export abstract class PolledView {
  el = h('section');
  protected body = h('div');
  private timer?: ReturnType<typeof setInterval>;

  constructor(private every: number) {}

  show(): void {
    this.shown();
    this.timer = setInterval(() => void this.refresh(), this.every);
  }

  hide(): void {
    clearInterval(this.timer);
  }

  // shown draws the view as it appears: it asks, unless it has the data.
  protected shown(): void {
    void this.refresh();
  }

  abstract refresh(): Promise<void>;
}
