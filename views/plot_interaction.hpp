// Navigating a plot as any plotting tool does, the same on every view: the wheel
// zooms, a drag pans, a double-click or the context menu's "Reset view" puts
// every axis back to the range its view laid out for the data, and the context
// menu switches the axes whose values span decades between log and linear.
// Legends go under the axes (a row of their own), where they never cover data.
//
//   auto* nav = views::install_navigation(plot_);            // in the view's constructor
//   nav->addLogToggle(plot_->yAxis, "eigenvalue axis");      // checkable menu entry
//   views::place_legend_below(plot_, plot_->legend, 3);      // three entries a row
//
// The reset needs nothing from the view: every range the program sets (not a
// wheel or drag) is remembered as the axis's home, so a view keeps setting its
// ranges where it already does.
#pragma once

#include <QObject>
#include <QPoint>
#include <QPointer>
#include <QSharedPointer>
#include <QString>
#include <QVector>

class QAction;
class QHBoxLayout;
class QLabel;
class QWidget;
class QCPAxis;
class QCPAxisTicker;
class QCPLegend;
class QCustomPlot;
class QMenu;

namespace embedlab::views {

class PlotNavigation : public QObject {
    Q_OBJECT
public:
    explicit PlotNavigation(QCustomPlot* plot); // a child of `plot`
    // A checkable "Logarithmic <name>" entry in the context menu for `axis`.
    QAction* addLogToggle(QCPAxis* axis, const QString& name);
    // Log or linear, with matching ticks (powers of ten: 10⁻⁴ ... in one notation)
    // and a range that fits the data on the new scale.
    void setLogScale(QCPAxis* axis, bool log);
    // Every axis back to the range its view last set (the data's).
    void resetView();
    QAction* resetAction() const { return reset_; }
    QList<QAction*> logToggles() const;
    // The context menu as shown on a right click (the caller owns it).
    QMenu* contextMenu(QWidget* parent) const;

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void trackAxes(); // new axes (a view may rebuild its layout): remember their home
    struct Scale {
        bool saved = false;
        QSharedPointer<QCPAxisTicker> ticker;
        QString format;
        int precision = 6;
        bool has_range = false; // the range last shown on this scale, while the data stay
        double lower = 0, upper = 1;
    };
    struct Toggle {
        QPointer<QCPAxis> axis;
        QAction* action;
        Scale linear, log;
    };

    QCustomPlot* plot_;
    QAction* reset_;
    QVector<Toggle> toggles_;
    bool user_ = false; // inside a wheel or drag: ranges change by the user's hand
};

// Wheel zoom and drag pan on `plot` (iRangeDrag | iRangeZoom), a double-click and
// a context-menu reset. Returns the plot's one navigation (installed once).
PlotNavigation* install_navigation(QCustomPlot* plot);
PlotNavigation* navigation(const QCustomPlot* plot); // nullptr if none installed

// Moves `legend` out of any axes into a new bottom row of the plot's layout (the
// plot's existing elements are grouped above it when they sit side by side),
// `columns` entries a row, compact and frameless.
void place_legend_below(QCustomPlot* plot, QCPLegend* legend, int columns);

// What an empty plot says in place of its data ("" takes it away): centred in the
// axes, whose ticks and tick labels are hidden meanwhile (an empty plot's ticks mean
// nothing, and squeezed they collide). Lines are split at '\n'.
void show_placeholder(QCustomPlot* plot, const QString& text);
QString placeholder(const QCustomPlot* plot); // the text shown ("": none)

// A view's frame, the same on every view: the "What am I seeing." paragraph
// `about` (word-wrapped) on top, `main` (the plot, or what holds it) taking the
// spare height, and under it a row for the view's controls, returned for the
// view to fill. The frame is `view`'s layout.
//
//   auto* controls = views::lay_out_view(this, "<b>What am I seeing.</b> ...", plot_);
//   controls->addWidget(spin_);
QHBoxLayout* lay_out_view(QWidget* view, const QString& about, QWidget* main);

// A read-out beside a view's controls: word-wrapped, and selectable so its numbers can be copied.
QLabel* readout_label(QWidget* parent);

} // namespace embedlab::views
