! ccx 2.20's .cvg, .sta and .dat lines, written as ccx writes them (bench item 3's reference,
! called by fe_replay.c): Fortran formatted records on ccx's units, with ccx's formats,
! flushed where ccx flushes them.
!
!   writecvg.f  a .cvg line an iteration, unit 11, flushed
!   writesta.f  a .sta line an increment, unit 8, flushed
!   *NODE PRINT the .dat's two tables an increment, unit 5: each a blank record, a heading
!               with the time, a blank record, its lines; flushed once an increment
!
! The headings of .cvg and .sta are written when ccx opens them and reach the file with the
! first line. KIND is fe_replay.c's: 0 a .cvg line, 1 the same after the heading, 2 a .sta
! line, 3 the same after the heading, 4 an increment's .dat.
!
!   gfortran -O2 -c ccx_lines.f90   (fe_output_overhead.compile_replay builds it with fe_replay.c)

module ccx_lines
  use iso_c_binding, only: c_char, c_double, c_int, c_long
  implicit none
  integer, parameter :: dat = 5, sta = 8, cvg = 11

contains

  ! Units 5, 8 and 11 opened on FOLDER's job.dat, job.sta and job.cvg (replaced).
  subroutine ccx_lines_open(folder, length) bind(C, name="ccx_lines_open")
    character(kind=c_char), intent(in) :: folder(*)
    integer(c_int), value :: length
    character(len=length) :: path
    integer :: i
    do i = 1, length
      path(i:i) = folder(i)
    end do
    close (dat)  ! preconnected to standard input
    open (unit=dat, file=path//'/job.dat', status='replace')
    open (unit=sta, file=path//'/job.sta', status='replace')
    open (unit=cvg, file=path//'/job.cvg', status='replace')
  end subroutine ccx_lines_open

  ! The descriptor of the file that lines of KIND go to.
  integer(c_int) function ccx_lines_fd(kind) bind(C, name="ccx_lines_fd")
    integer(c_long), value :: kind
    select case (kind)
    case (0, 1)
      ccx_lines_fd = fnum(cvg)
    case (2, 3)
      ccx_lines_fd = fnum(sta)
    case default
      ccx_lines_fd = fnum(dat)
    end select
  end function ccx_lines_fd

  ! A line of KIND with its numbers V (integers as whole doubles), written and flushed.
  subroutine ccx_lines_print(kind, v) bind(C, name="ccx_lines_print")
    integer(c_long), value :: kind
    real(c_double), intent(in) :: v(9)
    select case (kind)
    case (0, 1)
      if (kind == 1) then
        write (cvg, '(a)') 'SUMMARY OF C0NVERGENCE INFORMATION'
        write (cvg, '(a)') '  STEP   INC  ATT   ITER     CONT.   RESID.        CORR.      RESID.      CORR.'
        write (cvg, '(a)') '                              EL.    FORCE         DISP       FLUX        TEMP.'
        write (cvg, '(a)') '                              (#)     (%)           (%)        (%)         (%)'
      end if
      write (cvg, '(2x,i4,2x,i4,2x,i4,2x,i4,2x,i7,4(1x,e11.4))') &
        nint(v(1)), nint(v(2)), nint(v(3)), nint(v(4)), nint(v(5)), v(6), v(7), v(8), v(9)
      flush (cvg)
    case (2, 3)
      if (kind == 3) then
        write (sta, '(a)') 'SUMMARY OF JOB INFORMATION'
        write (sta, '(a)') '  STEP      INC     ATT  ITRS     TOT TIME     STEP TIME      INC TIME'
      end if
      write (sta, '(1x,i5,1x,i10,2(1x,i5),3(1x,e13.6))') &
        nint(v(1)), nint(v(2)), nint(v(3)), nint(v(4)), v(5), v(6), v(7)
      flush (sta)
    case (4)
      write (dat, *)
      write (dat, 100) 'LOAD', v(1)
      write (dat, *)
      write (dat, '(6x,1p,3(1x,e13.6))') v(2), v(3), v(4)
      write (dat, *)
      write (dat, 101) 'TIP', v(5)
      write (dat, *)
      write (dat, '(i10,1p,3(1x,e13.6))') nint(v(6)), v(7), v(8), v(9)
      flush (dat)
    end select
100 format(' total force (fx,fy,fz) for set ', a, ' and time ', e14.7)
101 format(' displacements (vx,vy,vz) for set ', a, ' and time ', e14.7)
  end subroutine ccx_lines_print

end module ccx_lines
